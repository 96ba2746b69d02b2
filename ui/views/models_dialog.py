"""The Models page: the catalogue as short cards (:mod:`ui.views.model_card`: what each model is good
for, its download size, whether it fits this computer, how much it reads at once, its licence, and
Download with its progress; details and the chart of memory against context one click away), and
on a second tab the models on this computer with Remove (the embedded model is listed too, and
cannot be removed) and Import of a GGUF file.

It shows what :class:`~ui.model_manager.ModelManager` reports and forwards clicks to it. What an
action ends with (a download, an import, a removal, or why it failed) is said here, in the status
line under the tabs; the window's banner says it only while this page is closed.

The page opens centred on the window, no taller than it nor than the screen, and can be resized
(:func:`place_over`).
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import (
    QDialog, QFileDialog, QHBoxLayout, QListWidget, QListWidgetItem, QPushButton, QScrollArea, QTabWidget,
    QVBoxLayout, QWidget,
)

from model_store.catalogue_schema import CatalogueError
from ui.formatting import fmt_bytes
from ui.model_manager import ModelManager
from ui.model_words import STEADY_PERCENT, gb
from ui.theme import text_scale
from ui.views.context_chart import ChartModel
from ui.views.model_card import DownloadRow, ModelCard, wrapped

REF_ROLE = Qt.ItemDataRole.UserRole
EMBEDDED_NOTE = "comes with Hearth; it cannot be deleted"
PREFERRED_SIZE = (860, 760)  # at 100 % text; wider with larger text, never past the window's height
CATALOGUE_TAB, INSTALLED_TAB = 0, 1


def place_over(dialog: QWidget, parent: QWidget | None) -> None:
    """Size ``dialog`` and centre it on ``parent``: no taller than ``parent`` and the screen's free
    area, no wider than that area; it stays resizable."""
    screen = (parent or dialog).screen().availableGeometry()
    over = parent.frameGeometry() if parent is not None else screen
    frame_w, frame_h = ((over.width() - parent.width(), over.height() - parent.height()) if parent is not None
                        else (0, 0))  # the window manager's frame, as the window has it
    width = min(round(PREFERRED_SIZE[0] * max(1.0, text_scale()) ** 0.5), screen.width() - frame_w)
    height = min(PREFERRED_SIZE[1], over.height() - frame_h, screen.height() - frame_h)
    dialog.resize(width, height)
    placed = QRect(0, 0, width + frame_w, height + frame_h)
    placed.moveCenter(over.center())
    placed.moveLeft(max(screen.left(), min(placed.left(), screen.right() + 1 - placed.width())))
    placed.moveTop(max(screen.top(), min(placed.top(), screen.bottom() + 1 - placed.height())))
    dialog.move(placed.topLeft())


class ModelsDialog(QDialog):
    def __init__(self, manager: ModelManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("models_dialog")
        self.setWindowTitle("Models")
        self.setSizeGripEnabled(True)
        self.manager = manager
        self.cards: dict[str, ModelCard] = {}  # by catalogue id, in catalogue order
        self.rows: dict[str, DownloadRow] = {}  # running downloads by "id:QUANT"
        self.listing: dict | None = None
        self._selected: str | None = None  # the file last chosen, opened or downloaded
        self._wanted: tuple[str, bool] | None = None  # (ref, download it) to show once the listing has it
        self._placed = False
        self._build()
        manager.listing_changed.connect(self.show_listing)
        manager.download_progress.connect(self._progress)
        manager.download_ended.connect(self._ended)
        manager.action_ended.connect(self._action_ended)
        manager.refresh()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        self.memory = wrapped()
        self.memory.setObjectName("models_memory")
        self.tabs = QTabWidget()
        self.catalogue = QScrollArea(widgetResizable=True)
        self.catalogue.setObjectName("catalogue")
        self.catalogue.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.card_list = QWidget()
        self.card_layout = QVBoxLayout(self.card_list)
        self.card_layout.addStretch(1)
        self.catalogue.setWidget(self.card_list)
        self.tabs.addTab(self.catalogue, "&Get models")
        self.tabs.addTab(self._installed_page(), "&On this computer")
        self.status = wrapped()
        self.status.setObjectName("models_status")
        layout.addWidget(self.memory)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.status)

    def _installed_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        self.installed = QListWidget()
        self.installed.setObjectName("installed_models")
        self.installed.setWordWrap(True)
        self.installed.currentItemChanged.connect(lambda *_: self._installed_selection_changed())
        self.delete_button = QPushButton("&Remove")
        self.delete_button.clicked.connect(self._delete_selected)
        self.delete_button.setEnabled(False)
        self.import_button = QPushButton("&Import GGUF file…")
        self.import_button.clicked.connect(self._import)
        buttons = QHBoxLayout()
        buttons.addWidget(self.delete_button)
        buttons.addWidget(self.import_button)
        buttons.addStretch(1)
        layout.addWidget(self.installed, 1)
        layout.addLayout(buttons)
        return page

    # -- the listing -----------------------------------------------------------------------------

    def show_listing(self, listing: dict) -> None:
        self.listing = listing
        available = listing["available_memory_bytes"]
        self.memory.setText(f"This computer has about {gb(available)} of memory free now. A model may use up to "
                            f"{listing['memory_budget_percent']} % of it, so other programs keep room.")
        self.memory.setToolTip(f"{fmt_bytes(available)} available, read again when it changes by "
                               f"{STEADY_PERCENT} % or more. The share is Settings → Model → memory budget.")
        for entry in listing["catalogue"]:
            self._card_for(entry).show_entry(entry, available)
        for gone in set(self.cards) - {entry["id"] for entry in listing["catalogue"]}:
            self.cards.pop(gone).deleteLater()
        self.installed.clear()
        if listing.get("embedded"):
            self._add_installed(listing["embedded"], EMBEDDED_NOTE)
        for model in listing["installed"]:
            self._add_installed(model, model["source"] + (" (file missing)" if model["missing"] else ""))
        self._installed_selection_changed()
        self._show_wanted()

    def _card_for(self, entry: dict) -> ModelCard:
        card = self.cards.get(entry["id"])
        if card is None:
            card = ModelCard(entry, self._chart_model, self.manager.cancel)
            card.selected.connect(self._select)
            card.download_requested.connect(self._download)
            self.card_layout.insertWidget(len(self.cards), card)
            self.cards[entry["id"]] = card
        return card

    def card(self, entry_id: str) -> ModelCard | None:
        return self.cards.get(entry_id)

    def card_of(self, ref: str) -> ModelCard | None:
        """The card of the file ``ref`` ("id:QUANT")."""
        return self.cards.get(ref.rpartition(":")[0])

    def _chart_model(self, ref: str) -> ChartModel | None:
        """A file's memory against context, from the catalogue the listing was read from."""
        if self.listing is None or self.manager.catalogue is None:
            return None
        try:
            entry, file = self.manager.catalogue.resolve(ref)
        except CatalogueError:
            return None
        return ChartModel.of(entry, file.size_bytes, self.listing["available_memory_bytes"],
                             self.listing["memory_budget_percent"])

    # -- choosing and downloading ----------------------------------------------------------------

    def show_model(self, ref: str, *, download: bool = False) -> None:
        """Show the file ``ref`` ("id:QUANT") as soon as the listing has it, and start its download if
        asked (a model another window suggested: one click there, no search here)."""
        self._wanted = (ref, download)
        self._show_wanted()

    def _show_wanted(self) -> None:
        if self._wanted is None or not self.select_ref(self._wanted[0]):
            return
        ref, download = self._wanted
        self._wanted = None
        self.tabs.setCurrentIndex(CATALOGUE_TAB)
        if download:
            self._download(ref)

    def select_ref(self, ref: str) -> bool:
        """Show the file ``ref`` on its card, scrolled into view; False if the catalogue has no such file."""
        card = self.card_of(ref)
        if card is None or not card.choose(ref.rpartition(":")[2]):
            return False
        self._selected = ref
        self.catalogue.ensureWidgetVisible(card)
        return True

    def selected_ref(self) -> str | None:
        return self._selected

    def _select(self, ref: str) -> None:
        self._selected = ref

    def _download(self, ref: str) -> None:
        card = self.card_of(ref)
        if card is None or ref in self.rows or card.choose(ref.rpartition(":")[2]) and card.status():
            return
        self._selected = ref
        self.status.setText("")
        self.rows[ref] = card.download_started(ref)
        self.manager.download(ref)

    def _progress(self, ref: str, event: dict) -> None:
        card = self.card_of(ref)
        if ref not in self.rows and card is not None:
            self.rows[ref] = card.download_started(ref)
        if ref in self.rows:
            self.rows[ref].show_progress(event)

    def _ended(self, ref: str, ok: bool, message: str) -> None:
        self.rows.pop(ref, None)
        card = self.card_of(ref)
        if card is not None:
            card.download_ended(ref)
        self._action_ended(ok, message)

    def _action_ended(self, ok: bool, text: str) -> None:
        """An action ended: say how, here, where it was asked for (a failure in bold)."""
        self.status.setText(text)
        font = self.status.font()
        font.setBold(not ok)
        self.status.setFont(font)

    # -- installed models ------------------------------------------------------------------------

    def _add_installed(self, model: dict, note: str) -> None:
        item = QListWidgetItem(f"{model['name']} — {fmt_bytes(model['size_bytes'])}, {note}")
        removable = model["source"] != "embedded" and model["id"] is not None
        item.setData(REF_ROLE, model["id"] if removable else None)
        item.setToolTip(model["path"])
        self.installed.addItem(item)

    def _installed_selection_changed(self) -> None:
        item = self.installed.currentItem()
        self.delete_button.setEnabled(item is not None and bool(item.data(REF_ROLE)))

    def _delete_selected(self) -> None:
        item = self.installed.currentItem()
        if item is not None and item.data(REF_ROLE):
            self.manager.remove(item.data(REF_ROLE))

    def _import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a model", "", "GGUF models (*.gguf);;All files (*)")
        if path:
            self.manager.import_file(path)

    # -- on screen -------------------------------------------------------------------------------

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if not self._placed:
            self._placed = True
            place_over(self, self.parentWidget())
        super().showEvent(event)
        self.manager.page_open = True

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().hideEvent(event)
        self.manager.page_open = False
