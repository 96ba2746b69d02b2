"""The Models page: the catalogue (each model with its one-line description and licence, each
quantization with its memory-fit badge and size), downloads with progress, speed, time left and
Cancel, the installed models with Delete (the embedded model is listed too, and cannot be
deleted), and Import of a GGUF file. Each quantization shows the context it can use here (what this
machine's memory budget holds, never past the trained maximum; where memory would hold more, that is
said as headroom) and what a transformer of equal size would get, and the selected one is drawn in
a chart of memory against context (:mod:`ui.views.context_chart`).

It shows what :class:`~ui.model_manager.ModelManager` reports and forwards clicks to it. What an
action ends with (a download, an import, a removal, or why it failed) is said here, in the status
line under the catalogue; the window's banner says it only while this page is closed.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QPalette, QTextDocumentFragment
from PySide6.QtWidgets import (
    QDialog, QFileDialog, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QProgressBar, QPushButton,
    QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget,
)

from app.services.model_listing import context_words
from model_store.catalogue_schema import CatalogueError
from ui.formatting import fmt_bytes, fmt_duration
from ui.model_manager import ModelManager
from ui.theme import colour
from ui.views.context_chart import ChartModel, ContextChart

FIT_TEXT = {"fits": "fits", "tight": "tight: may swap", "too_big": "too big"}
FIT_TONE = {"fits": "good", "tight": "caution", "too_big": "bad"}  # ui.theme.colour, light or dark
REF_ROLE = Qt.ItemDataRole.UserRole
ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1  # a catalogue model's id, on its row
EMBEDDED_NOTE = "comes with Hearth; it cannot be deleted"
STATUS_COLUMN, CONTEXT_COLUMN = 3, 4


class DownloadRow(QWidget):
    """One running download: name, bar, speed and time left, Cancel."""

    def __init__(self, ref: str, manager: ModelManager) -> None:
        super().__init__()
        self.setObjectName(f"download:{ref}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel(ref)
        self.bar = QProgressBar(maximum=1000, textVisible=True)
        self.bar.setAccessibleName(f"Downloading {ref}")
        self.cancel = QPushButton("Cancel")
        self.cancel.clicked.connect(lambda: manager.cancel(ref))
        layout.addWidget(self.label)
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.cancel)

    def show_progress(self, event: dict) -> None:
        done, total = event["downloaded_bytes"], max(1, event["total_bytes"])
        self.bar.setValue(int(done * 1000 / total))
        eta = event.get("eta_seconds")
        left = f" · {fmt_duration(eta)} left" if eta is not None else ""
        self.bar.setFormat(f"{done / total:.0%} of {fmt_bytes(total)} · {fmt_bytes(event['bytes_per_second'])}/s{left}")


class EntryTitle(QWidget):
    """A catalogue model's row: its name, architecture and licence, and under them its description."""

    def __init__(self, entry: dict) -> None:
        super().__init__()
        self.setObjectName(f"entry:{entry['id']}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 3, 2, 3)
        layout.setSpacing(0)
        self.name = QLabel(f"<b>{escape(entry['name'])}</b> ({escape(entry['architecture'])}) · "
                           f"Licence: {escape(entry['licence'])}", textFormat=Qt.TextFormat.RichText)
        self.details = QLabel(entry["description"], textFormat=Qt.TextFormat.PlainText)
        self.details.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.setToolTip(f"{entry['description']}\n{entry['repo_id']} · trained context "
                        f"{entry['context_length']:,} tokens")
        layout.addWidget(self.name)
        layout.addWidget(self.details)

    def text(self) -> str:
        """What the row says, as plain text."""
        return f"{QTextDocumentFragment.fromHtml(self.name.text()).toPlainText()}\n{self.details.text()}"


class ModelsDialog(QDialog):
    def __init__(self, manager: ModelManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("models_dialog")
        self.setWindowTitle("Models")
        self.resize(960, 820)
        self.manager = manager
        self.rows: dict[str, DownloadRow] = {}
        self.listing: dict | None = None
        self._wanted: tuple[str, bool] | None = None  # (ref, download it) to show once the listing has it
        self._build()
        manager.listing_changed.connect(self.show_listing)
        manager.download_progress.connect(self._progress)
        manager.download_ended.connect(self._ended)
        manager.action_ended.connect(self._action_ended)
        manager.refresh()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        self.memory = QLabel()
        self.catalogue = QTreeWidget()
        self.catalogue.setObjectName("catalogue")
        self.catalogue.setHeaderLabels(["Model", "Size", "Memory", "Status", "Reads at once on this computer"])
        self.catalogue.headerItem().setToolTip(CONTEXT_COLUMN, "The context this computer's memory holds with the file: "
                                               "how many tokens of conversation and documents the model reads at once "
                                               "(for a transformer of the same size it would be far fewer)")
        self.catalogue.setColumnWidth(0, 200)  # a quantization; a model's own row spans every column
        self.catalogue.setColumnWidth(STATUS_COLUMN, 90)
        self.chart = ContextChart()
        self.catalogue.itemSelectionChanged.connect(self._selection_changed)
        self.catalogue.itemActivated.connect(lambda *_: self._download_selected())
        self.download_button = QPushButton("&Download")
        self.download_button.clicked.connect(self._download_selected)
        self.downloads = QVBoxLayout()
        self.status = QLabel()
        self.status.setObjectName("models_status")
        self.status.setWordWrap(True)
        self.installed = QListWidget()
        self.installed.setObjectName("installed_models")
        self.installed.currentItemChanged.connect(lambda *_: self._installed_selection_changed())
        self.delete_button = QPushButton("De&lete")
        self.delete_button.clicked.connect(self._delete_selected)
        self.delete_button.setEnabled(False)
        self.import_button = QPushButton("&Import GGUF…")
        self.import_button.clicked.connect(self._import)
        layout.addWidget(self.memory)
        layout.addWidget(self.catalogue, 3)
        layout.addWidget(self.chart, 2)
        layout.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(self.downloads)
        layout.addWidget(self.status)
        layout.addWidget(QLabel("Installed:", buddy=self.installed))
        layout.addWidget(self.installed, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.delete_button)
        buttons.addWidget(self.import_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self._selection_changed()

    def show_listing(self, listing: dict) -> None:
        selected = self.selected_ref()
        self.listing = listing
        self.memory.setText(f"Memory advice for this machine: {fmt_bytes(listing['available_memory_bytes'])} "
                            f"available now, of which an automatic context may fill "
                            f"{listing['memory_budget_percent']} %. ★ marks the recommended quantization.")
        self.catalogue.clear()
        for entry in listing["catalogue"]:
            self._add_entry(entry)
        self.catalogue.expandAll()
        if selected:
            self.select_ref(selected)
        self.installed.clear()
        if listing.get("embedded"):
            self._add_installed(listing["embedded"], EMBEDDED_NOTE)
        for model in listing["installed"]:
            self._add_installed(model, model["source"] + (" (file missing)" if model["missing"] else ""))
        self._selection_changed()
        self._installed_selection_changed()
        self._show_wanted()

    def show_model(self, ref: str, *, download: bool = False) -> None:
        """Select the file ``ref`` ("id:QUANT") as soon as the listing has it, and start its download if
        asked (a model another window suggested: one click there, no search here)."""
        self._wanted = (ref, download)
        self._show_wanted()

    def _show_wanted(self) -> None:
        if self._wanted is None or not self.select_ref(self._wanted[0]):
            return
        ref, download = self._wanted
        self._wanted = None
        self.catalogue.scrollToItem(self.variant_item(ref))
        if download:
            self._download_selected()

    def _add_installed(self, model: dict, note: str) -> None:
        item = QListWidgetItem(f"{model['name']} — {fmt_bytes(model['size_bytes'])}, {note}")
        removable = model["source"] != "embedded" and model["id"] is not None
        item.setData(REF_ROLE, model["id"] if removable else None)
        item.setToolTip(model["path"])
        self.installed.addItem(item)

    def _installed_selection_changed(self) -> None:
        item = self.installed.currentItem()
        self.delete_button.setEnabled(item is not None and bool(item.data(REF_ROLE)))

    def _add_entry(self, entry: dict) -> None:
        item = self._entry_item(entry)
        self.catalogue.addTopLevelItem(item)
        item.setFirstColumnSpanned(True)
        title = EntryTitle(entry)
        item.setSizeHint(0, title.sizeHint())
        self.catalogue.setItemWidget(item, 0, title)

    def entry_item(self, entry_id: str) -> QTreeWidgetItem | None:
        items = (self.catalogue.topLevelItem(i) for i in range(self.catalogue.topLevelItemCount()))
        return next((item for item in items if item.data(0, ENTRY_ROLE) == entry_id), None)

    def entry_title(self, entry_id: str) -> EntryTitle | None:
        """What names a catalogue model on its row: name, description, licence."""
        item = self.entry_item(entry_id)
        return self.catalogue.itemWidget(item, 0) if item is not None else None

    def _entry_item(self, entry: dict) -> QTreeWidgetItem:
        item = QTreeWidgetItem([""])
        item.setData(0, ENTRY_ROLE, entry["id"])
        item.setData(0, Qt.ItemDataRole.AccessibleTextRole, f"{entry['name']}: {entry['description']}, "
                                                             f"licence {entry['licence']}")
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
        for variant in entry["variants"]:
            star = " ★" if variant["recommended"] else ""
            size = ("~" if variant["size_estimated"] else "") + fmt_bytes(variant["size_bytes"])
            fit = f"{FIT_TEXT[variant['fit']]}{star}"
            ref = f"{entry['id']}:{variant['quant']}"
            status = "installed" if variant["installed_id"] else ("downloading" if ref in self.rows else "")
            child = QTreeWidgetItem([variant["quant"], size, fit, status, _context_text(entry, variant)])
            child.setData(0, REF_ROLE, ref)
            child.setForeground(2, QBrush(colour(FIT_TONE[variant["fit"]])))
            child.setToolTip(2, f"needs about {fmt_bytes(variant['needed_bytes'])} at "
                                f"{entry['context_tokens']:,} tokens of context")
            child.setToolTip(CONTEXT_COLUMN, _context_tooltip(entry, variant))
            item.addChild(child)
        return item

    def selected_ref(self) -> str | None:
        items = self.catalogue.selectedItems()
        return items[0].data(0, REF_ROLE) if items else None

    def variant_item(self, ref: str) -> QTreeWidgetItem | None:
        for top in range(self.catalogue.topLevelItemCount()):
            entry = self.catalogue.topLevelItem(top)
            for index in range(entry.childCount()):
                if entry.child(index).data(0, REF_ROLE) == ref:
                    return entry.child(index)
        return None

    def select_ref(self, ref: str) -> bool:
        item = self.variant_item(ref)
        if item is not None:
            self.catalogue.setCurrentItem(item)
        return item is not None

    def _selection_changed(self) -> None:
        items = self.catalogue.selectedItems()
        can = bool(items) and items[0].text(STATUS_COLUMN) == "" and items[0].data(0, REF_ROLE) not in self.rows
        self.download_button.setEnabled(can)
        self.chart.show_model(self._chart_model(self.selected_ref()))

    def _chart_model(self, ref: str | None) -> ChartModel | None:
        """The selected quantization's memory against context, from the catalogue the listing was read from."""
        if ref is None or self.listing is None or self.manager.catalogue is None:
            return None
        try:
            entry, file = self.manager.catalogue.resolve(ref)
        except CatalogueError:
            return None
        return ChartModel.of(entry, file.size_bytes, self.listing["available_memory_bytes"],
                             self.listing["memory_budget_percent"])

    def _download_selected(self) -> None:
        ref = self.selected_ref()
        if ref and self.download_button.isEnabled():
            self._add_row(ref)
            self.manager.download(ref)

    def _add_row(self, ref: str) -> None:
        row = DownloadRow(ref, self.manager)
        self.rows[ref] = row
        self.downloads.addWidget(row)
        self.status.setText("")
        self._set_status_of(ref, "downloading")

    def _progress(self, ref: str, event: dict) -> None:
        if ref not in self.rows:
            self._add_row(ref)
        self.rows[ref].show_progress(event)

    def _ended(self, ref: str, ok: bool, message: str) -> None:
        row = self.rows.pop(ref, None)
        if row is not None:
            row.deleteLater()
        self._action_ended(ok, message)
        self._set_status_of(ref, "installed" if ok else "")

    def _set_status_of(self, ref: str, text: str) -> None:
        item = self.variant_item(ref)
        if item is not None:
            item.setText(STATUS_COLUMN, text)
        self._selection_changed()

    def _action_ended(self, ok: bool, text: str) -> None:
        """An import or a removal ended: say how, here, where it was asked for (a failure in bold)."""
        self.status.setText(text)
        font = self.status.font()
        font.setBold(not ok)
        self.status.setFont(font)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.manager.page_open = True

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.manager.page_open = False

    def _delete_selected(self) -> None:
        item = self.installed.currentItem()
        if item is not None and item.data(REF_ROLE):
            self.manager.remove(item.data(REF_ROLE))

    def _import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a model", "", "GGUF models (*.gguf);;All files (*)")
        if path:
            self.manager.import_file(path)


def _context_text(entry: dict, variant: dict) -> str:
    """``"130,048 of 262,144 trained · transformer: 32,768"`` where memory is the limit, ``"262,144
    (trained max; memory: 1,353,472) · transformer: 262,144"`` where the trained length is: the
    memory figure is headroom, not context (the tooltip says it in words)."""
    used, memory = variant["max_context_tokens"], variant["memory_context_tokens"]
    if memory > used:
        here = f"{used:,} (trained max; memory: {memory:,})"
    else:
        here = f"{used:,} of {entry['context_length']:,} trained"
    return f"{here} · transformer: {variant['transformer_max_context_tokens']:,}"


def _transformer_words(variant: dict) -> str:
    return context_words(variant["transformer_max_context_tokens"], variant["transformer_memory_context_tokens"])


def _context_tooltip(entry: dict, variant: dict) -> str:
    used, memory, trained = variant["max_context_tokens"], variant["memory_context_tokens"], entry["context_length"]
    if memory > used:
        held = (f"The memory budget would hold {memory:,} tokens of context with this file, but it was trained on "
                f"up to {trained:,}, so an automatic context gets {used:,}; the rest is headroom, not context.")
    else:
        held = (f"The memory budget holds {memory:,} tokens of context with this file; it was trained on up to "
                f"{trained:,}, so an automatic context gets {used:,}.")
    return f"{held} A transformer of equal size would get {_transformer_words(variant)}."
