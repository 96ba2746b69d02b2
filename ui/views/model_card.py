"""One catalogue model on the Models page, as a short card (LM Studio's and Jan's model pages).

The card says, in words people know: the model's name, what it is good for, whether it fits this
computer (or why not), how much it reads at once, its download size and its licence; a Download
button, and while downloading, a bar with speed, time left and Cancel. The technical side (the
description, the file's quantization, the trained length, a transformer's context, and the chart of
memory against context) is one click away, under Details. The figures follow the file chosen in
the card's file list (the recommended one at first).

Everything shown comes from one entry of :func:`app.services.model_listing.listing_json` (with the
free memory the page shows, kept steady by :mod:`ui.model_words`).
"""

from __future__ import annotations

from collections.abc import Callable
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox, QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget,
)

from ui.formatting import fmt_bytes, fmt_duration
from ui.model_words import fit_words, gb, reads_tooltip, words_at_once
from ui.theme import set_tone, set_type
from ui.views.context_chart import ChartModel, ContextChart

FIT_TONE = {"fits": "good", "tight": "caution", "too_big": "bad"}
QUANT_TIP = ("The same model stored in different sizes: a smaller file is quicker and needs less memory, a larger "
             "one answers a little better. (Technical name: quantization.)")


def wrapped(text: str = "", kind: str = "body") -> QLabel:
    """A label that wraps instead of cutting its text, at any text size."""
    label = QLabel(text, wordWrap=True, textFormat=Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    set_type(label, kind)
    return label


class DownloadRow(QWidget):
    """One running download: bar with speed and time left, and Cancel."""

    def __init__(self, ref: str, cancel: Callable[[str], None]) -> None:
        super().__init__()
        self.setObjectName(f"download:{ref}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.bar = QProgressBar(maximum=1000, textVisible=True)
        self.bar.setAccessibleName(f"Downloading {ref}")
        self.bar.setFormat("Starting…")
        self.cancel = QPushButton("Cancel")
        self.cancel.clicked.connect(lambda: cancel(ref))
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.cancel)

    def show_progress(self, event: dict) -> None:
        done, total = event["downloaded_bytes"], max(1, event["total_bytes"])
        self.bar.setValue(int(done * 1000 / total))
        eta = event.get("eta_seconds")
        left = f" · {fmt_duration(eta)} left" if eta is not None else ""
        self.bar.setFormat(f"{done / total:.0%} of {fmt_bytes(total)} · {fmt_bytes(event['bytes_per_second'])}/s{left}")


class ModelCard(QFrame):
    """A catalogue entry's card; :attr:`download_requested` and :attr:`selected` carry "id:QUANT"."""

    download_requested = Signal(str)
    selected = Signal(str)

    def __init__(self, entry: dict, chart_model: Callable[[str], ChartModel | None],
                 cancel: Callable[[str], None]) -> None:
        super().__init__()
        self.entry_id = entry["id"]
        self.setObjectName(f"card:{entry['id']}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._chart_model, self._cancel = chart_model, cancel
        self.entry: dict = entry
        self.available = 0
        self.rows: dict[str, DownloadRow] = {}  # running downloads of this model's files
        self.chart: ContextChart | None = None  # made when Details first opens
        self._build()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.title = wrapped(kind="title")
        self.download = QPushButton("Download")
        self.download.clicked.connect(lambda: self.download_requested.emit(self.ref()))
        top.addWidget(self.title, 1)
        top.addWidget(self.download, 0, Qt.AlignmentFlag.AlignTop)
        self.good_for, self.fit, self.reads, self.facts = wrapped(), wrapped(), wrapped(), wrapped()
        self.reads.setCursor(Qt.CursorShape.WhatsThisCursor)
        self.quant = QComboBox()
        self.quant.setToolTip(QUANT_TIP)
        self.quant.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.quant.activated.connect(lambda _: self._quant_chosen())
        self.details_button = QPushButton("Details", checkable=True)
        self.details_button.toggled.connect(self.show_details)
        choices = QHBoxLayout()
        choices.addWidget(self.quant)
        choices.addWidget(self.details_button)
        choices.addStretch(1)
        self.progress = QVBoxLayout()
        self.details = QWidget()
        self.details.setObjectName("details")
        details = QVBoxLayout(self.details)
        details.setContentsMargins(0, 0, 0, 0)
        self.technical = wrapped(kind="caption")
        details.addWidget(self.technical)
        self.details.hide()
        for part in (top, self.good_for, self.fit, self.reads, self.facts, choices, self.progress, self.details):
            (layout.addLayout if isinstance(part, QHBoxLayout | QVBoxLayout) else layout.addWidget)(part)

    # -- what it shows ---------------------------------------------------------------------------

    def show_entry(self, entry: dict, available: int) -> None:
        """Show ``entry`` (one of the listing's) with ``available`` bytes of free memory."""
        quant = self.quant.currentData() if self.quant.count() else None
        self.entry, self.available = entry, available
        self.title.setText(entry["name"])
        self.good_for.setText(f"Good for: {entry.get('good_for') or entry['description']}")
        self.quant.clear()
        for variant in entry["variants"]:
            tail = " (recommended)" if variant["quant"].upper() == entry["recommended_quant"].upper() else ""
            self.quant.addItem(f"{gb(variant['size_bytes'])} file, {variant['quant']}{tail}", variant["quant"])
        index = self.quant.findData(quant if quant is not None else entry["recommended_quant"])
        self.quant.setCurrentIndex(max(0, index))
        self.quant.setVisible(self.quant.count() > 1)
        self._show_variant()

    def variant(self) -> dict:
        quant = self.quant.currentData()
        return next((v for v in self.entry["variants"] if v["quant"] == quant), self.entry["variants"][0])

    def ref(self) -> str:
        return f"{self.entry_id}:{self.variant()['quant']}"

    def choose(self, quant: str) -> bool:
        """Show the file ``quant``; False if the model has none."""
        index = self.quant.findData(quant)
        if index < 0:
            return False
        self.quant.setCurrentIndex(index)
        self._show_variant()
        return True

    def _quant_chosen(self) -> None:
        self._show_variant()
        self.selected.emit(self.ref())

    def _show_variant(self) -> None:
        entry, variant = self.entry, self.variant()
        self.fit.setText(fit_words(variant["fit"], variant["needed_bytes"], self.available))
        self.fit.setToolTip(f"Estimated for {entry['context_tokens']:,} tokens of context: the file, the memory the "
                            f"conversation takes and Hearth's own {fmt_bytes(variant['needed_bytes'] - variant['size_bytes'])} "
                            f"or so; it fits when it needs at most 70 % of the free memory.")
        set_tone(self.fit, FIT_TONE[variant["fit"]])
        self.reads.setText(words_at_once(variant["max_context_tokens"]))
        self.reads.setToolTip(reads_tooltip(entry, variant))
        size = ("about " if variant["size_estimated"] else "") + gb(variant["size_bytes"])
        self.facts.setText(f"{size} download · Licence: {entry['licence']}")
        self.technical.setText(f"{entry['description']}\n{entry['name']} ({entry['architecture']}), file "
                               f"{variant['filename']} ({variant['quant']}, {fmt_bytes(variant['size_bytes'])}) from "
                               f"{entry['repo_id']}. Trained on up to {entry['context_length']:,} tokens.")
        self._show_state()
        if self.chart is not None:
            self.chart.show_model(self._chart_model(self.ref()))

    def _show_state(self) -> None:
        """The Download button: installed, downloading, or ready."""
        ref, installed = self.ref(), self.variant()["installed_id"]
        self.download.setEnabled(not installed and ref not in self.rows)
        self.download.setText("Installed" if installed else ("Downloading…" if ref in self.rows else "Download"))
        self.download.setAccessibleName(f"{self.download.text()} {self.entry['name']}")

    def status(self) -> str:
        """``"installed"``, ``"downloading"`` or ``""`` for the file shown."""
        return {"Installed": "installed", "Downloading…": "downloading"}.get(self.download.text(), "")

    def show_details(self, on: bool) -> None:
        """Open or close the technical details and the chart."""
        if on and self.chart is None:
            self.chart = ContextChart()
            self.details.layout().addWidget(self.chart)
        if on:
            self.chart.show_model(self._chart_model(self.ref()))
            self.selected.emit(self.ref())
        self.details.setVisible(on)
        self.details_button.setChecked(on)
        self.details_button.setText("Hide details" if on else "Details")

    def text(self) -> str:
        """What the card says, as plain text (title, good for, fit, reads, facts)."""
        return "\n".join(label.text() for label in (self.title, self.good_for, self.fit, self.reads, self.facts))

    def labels(self) -> list[QLabel]:
        """The card's text labels, for checks that nothing is cut."""
        return [self.title, self.good_for, self.fit, self.reads, self.facts]

    # -- downloads -------------------------------------------------------------------------------

    def download_started(self, ref: str) -> DownloadRow:
        if ref not in self.rows:
            self.rows[ref] = DownloadRow(ref, self._cancel)
            self.progress.addWidget(self.rows[ref])
        self._show_state()
        return self.rows[ref]

    def download_ended(self, ref: str) -> None:
        row = self.rows.pop(ref, None)
        if row is not None:
            row.deleteLater()
        self._show_state()
