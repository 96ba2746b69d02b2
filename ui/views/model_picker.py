"""Which model answers: the embedded default, the models installed under the data folder, any
GGUF file the user opens, or a remote engine (``engine:NAME``, set up in Settings → Engines); and
the way to the Models page. Shows what is loading ("Loading SmolLM2 135M Instruct…", named as
:meth:`ModelPicker.model_label` names it) with its progress; a failed load is explained in the banner.

The list keeps the width its entries had when first shown, whatever the state line beside it says:
that line takes the room left and is cut with "…" (:class:`~ui.views.elided_label.ElidedLabel`),
so a long context report or loading text never squeezes the model's name. Its essential part (what
the model reads at once, or what is loading) is never cut: where the row has no room for it (a
large text size, a narrow window) the line goes under the list instead, the whole text in its tooltip.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QComboBox, QFileDialog, QGridLayout, QLabel, QProgressBar, QSizePolicy, QWidget

from model_store.installed import EMBEDDED_NAME, InstalledModel
from ui.formatting import model_name
from ui.views.elided_label import ElidedLabel

DEFAULT_LABEL = f"{EMBEDDED_NAME} (embedded default)"
OPEN_FILE = "__open_file__"
MANAGE = "__manage__"


class ModelPicker(QWidget):
    model_chosen = Signal(str)  # "default", a path or "engine:NAME"
    manage_requested = Signal()  # "Download or import models…"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self.combo = QComboBox()
        self.combo.setObjectName("model_picker")
        self.combo.setAccessibleName("Model")
        self.combo.setMinimumContentsLength(28)
        self.combo.setSizePolicy(QSizePolicy.Policy.Fixed, self.combo.sizePolicy().verticalPolicy())
        self.progress = QProgressBar(maximum=100, textVisible=True)
        self.progress.setObjectName("model_progress")
        self.progress.setMaximumWidth(120)
        self.progress.hide()
        self.state = ElidedLabel()
        self.state.setObjectName("model_state")
        self.title = QLabel("Model:", buddy=self.combo)
        self._grid.addWidget(self.title, 0, 0)
        self._grid.addWidget(self.combo, 0, 1)
        self._grid.addWidget(self.progress, 0, 2)
        self._grid.setColumnStretch(3, 1)
        self._one_row: bool | None = None  # the state line beside the list (True) or under it (False)
        self._place_state()
        self._current = "default"
        self._installed: list[InstalledModel] = []
        self._engines: list[tuple[str, str]] = []  # (reference, label) of each remote engine
        self.combo.activated.connect(self._activated)

    def set_engines(self, engines: list[tuple[str, str]]) -> None:
        """List these remote engines (``("engine:NAME", label)``) after the local models."""
        self._engines = list(engines)
        self.set_models(self._installed, self._current)

    def set_models(self, installed: list[InstalledModel], current: str) -> None:
        self._installed = list(installed)
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(DEFAULT_LABEL, "default")
        for model in installed:
            self.combo.addItem(f"{model.name} ({model.size_bytes / 2**20:,.0f} MiB)", str(model.path))
        for ref, label in self._engines:
            self.combo.addItem(label, ref)
        if current != "default" and self.combo.findData(current) < 0:
            self.combo.addItem(Path(current).name, current)
        self.combo.addItem("Open a GGUF file…", OPEN_FILE)
        self.combo.addItem("Download or import models…", MANAGE)
        self.combo.blockSignals(False)
        self.set_current(current)

    def set_current(self, ref: str) -> None:
        self._current = ref
        index = self.combo.findData(ref)
        if index >= 0:
            self.combo.setCurrentIndex(index)

    def model_label(self, ref: str) -> str:
        """What the model ``ref`` is called here: the embedded model's name, an installed model's
        (a download's is the catalogue's), a remote engine's entry, else the file's name."""
        if ref == "default":
            return EMBEDDED_NAME
        installed = next((m.name for m in self._installed if str(m.path) == ref), None)
        engine = next((label for engine_ref, label in self._engines if engine_ref == ref), None)
        return installed or engine or model_name(ref)

    def show_progress(self, text: str, fraction: float) -> None:
        """Loading: ``text`` says what ("Loading SmolLM2 135M Instruct…"), ``fraction`` in 0..1; below 0
        the load is over (the state line is then the model's, :meth:`show_state`)."""
        loading = fraction >= 0
        self.progress.setVisible(loading)
        self.progress.setRange(0, 100 if fraction > 0 else 0)  # nothing measured yet: a busy bar, not "0%"
        self.progress.setValue(int(max(0.0, fraction) * 100))
        self.state.set_essential(None)
        self.state.setText(text if loading else "")
        self._place_state()

    def show_state(self, text: str, terms: str = "") -> None:
        """``text`` in plain words; ``terms``, the same in technical terms, as its tooltip. What comes
        before the first " · " (how much the model reads at once) always shows whole."""
        self.state.set_essential(text.split(" · ")[0])
        self.state.setText(text)
        self.state.set_details(terms)
        self._place_state()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._place_state()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override): the text size changed
        super().changeEvent(event)
        if hasattr(self, "_grid"):
            self._place_state()

    def _place_state(self) -> None:
        """The state line beside the list when its essential part fits there, else on a row of its own."""
        one_row = self.width() >= self._one_row_width()
        if one_row == self._one_row:
            return
        self._one_row = one_row
        self._grid.removeWidget(self.state)
        if one_row:
            self._grid.addWidget(self.state, 0, 3)
        else:
            self._grid.addWidget(self.state, 1, 0, 1, 4)

    def _one_row_width(self) -> int:
        parts = [self.title.sizeHint().width(), self.combo.sizeHint().width(), self.state.essential_width()]
        if self.progress.isVisibleTo(self):
            parts.append(min(self.progress.sizeHint().width(), self.progress.maximumWidth()))
        return sum(parts) + max(0, self._grid.horizontalSpacing()) * (len(parts) - 1)

    def _activated(self, index: int) -> None:
        ref = self.combo.itemData(index)
        if ref == MANAGE:
            self.set_current(self._current)
            self.manage_requested.emit()
            return
        if ref == OPEN_FILE:
            path, _ = QFileDialog.getOpenFileName(self, "Open a model", "", "GGUF models (*.gguf);;All files (*)")
            self.set_current(self._current)
            if not path:
                return
            self.combo.insertItem(self.combo.findData(OPEN_FILE), Path(path).name, path)
            ref = path
        if ref != self._current:
            self.set_current(ref)
            self.model_chosen.emit(ref)
