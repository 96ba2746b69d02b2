"""Settings → Engines: this computer and every remote engine, with Add, Edit, Remove and Test.

The list is read from the :class:`~app.services.engines.EngineRegistry` each time it changes (the
file is shared with ``hearth engines``), "This computer" first: it is always there and cannot be
edited or removed here (its model is chosen in the model menu). Adding and editing open an
:class:`~ui.views.engine_form.EngineForm`; a saved or removed engine is announced through
:attr:`EnginesDialog.engines_changed`, so the model picker lists it at once. What the last action
did (where a key went, what was removed, what a test found) is said in the line under the list.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget,
)

from app.services.engines import EngineEntry, EngineProblem, EngineRegistry
from ui.remote_engines import RemoteWork
from ui.remote_text import THIS_COMPUTER, probe_text, sentence
from ui.theme import set_tone
from ui.views.engine_form import ERROR_TONE, EngineForm

COLUMNS = ("Name", "Address", "Model")
LOCAL_MODEL = "the model chosen in the model menu"


class EnginesDialog(QDialog):
    engines_changed = Signal()  # an engine was added, edited or removed

    def __init__(self, registry: EngineRegistry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Engines")
        self.registry = registry
        self.form: EngineForm | None = None  # the add/edit form while it is open
        self.work = RemoteWork()
        self._open = True
        self.table = QTreeWidget(objectName="engines_list", rootIsDecorated=False)
        self.table.setHeaderLabels(COLUMNS)
        self.table.setAccessibleName("Engines")
        self.add_button = QPushButton("Add…", objectName="engine_add")
        self.edit_button = QPushButton("Edit…", objectName="engine_edit")
        self.remove_button = QPushButton("Remove", objectName="engine_remove")
        self.test_button = QPushButton("Test", objectName="engine_test_listed")
        self.status = QLabel(objectName="engines_status", wordWrap=True)
        buttons = QHBoxLayout()
        for button in (self.add_button, self.edit_button, self.remove_button, self.test_button):
            button.setAutoDefault(False)
            buttons.addWidget(button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Conversations, documents and history stay on this computer; a remote engine "
                                "receives the messages of the conversations it answers.", wordWrap=True))
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(close)
        self.add_button.clicked.connect(self.add)
        self.edit_button.clicked.connect(self.edit)
        self.remove_button.clicked.connect(self.remove)
        self.test_button.clicked.connect(self.test)
        self.table.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.table.itemDoubleClicked.connect(lambda *_: self.edit())
        self.resize(640, 360)
        self.refresh()
        for problem in registry.problems:
            self._say(problem, ERROR_TONE)

    # -- the list --------------------------------------------------------------------------------

    def refresh(self, select: str | None = None) -> None:
        """Read the engines again; select ``select`` (a name) if given."""
        self.table.clear()
        self.table.addTopLevelItem(_item(THIS_COMPUTER, "", "—", LOCAL_MODEL))
        for entry in self.registry.entries():
            self.table.addTopLevelItem(_item(entry.name, entry.name, entry.url, entry.model or "its first model"))
        names = self.names()
        row = names.index(select) + 1 if select in names else 0
        self.table.setCurrentItem(self.table.topLevelItem(row))
        for column in range(len(COLUMNS)):
            self.table.resizeColumnToContents(column)
        self._update_buttons()

    def names(self) -> list[str]:
        """The remote engines listed, in order (this computer is not one)."""
        items = (self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount()))
        return [name for item in items if (name := item.data(0, Qt.ItemDataRole.UserRole))]

    def rows(self) -> list[tuple[str, ...]]:
        """What each row shows, column by column."""
        items = (self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount()))
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in items]

    def select(self, name: str) -> None:
        self.table.setCurrentItem(self.table.topLevelItem(self.names().index(name) + 1))

    def selected(self) -> EngineEntry | None:
        item = self.table.currentItem()
        name = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else ""
        if not name:
            return None
        try:
            return self.registry.get(name)
        except EngineProblem:  # removed meanwhile (by `hearth engines rm`)
            self.refresh()
            return None

    def _update_buttons(self) -> None:
        item = self.table.currentItem()
        remote = item is not None and bool(item.data(0, Qt.ItemDataRole.UserRole))
        for button in (self.edit_button, self.remove_button, self.test_button):
            button.setEnabled(remote)

    def _say(self, text: str, tone: str = "") -> None:
        set_tone(self.status, tone)
        self.status.setText(text)

    # -- actions ---------------------------------------------------------------------------------

    def add(self) -> EngineForm:
        return self._open_form(None)

    def edit(self) -> EngineForm | None:
        entry = self.selected()
        return self._open_form(entry) if entry is not None else None

    def _open_form(self, entry: EngineEntry | None) -> EngineForm:
        form = EngineForm(self.registry, entry, self)
        form.setObjectName("engine_form")
        form.accepted.connect(lambda: self._saved(form))
        form.finished.connect(lambda _: setattr(self, "form", None))
        form.open()
        self.form = form
        return form

    def _saved(self, form: EngineForm) -> None:
        self.refresh(select=form.saved.name)
        self._say(f"Saved {form.saved.name}. {form.key_note}")
        self.engines_changed.emit()

    def remove(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        try:
            self.registry.remove(entry.name)
        except EngineProblem as exc:
            self._say(sentence(str(exc)), ERROR_TONE)
            return
        self.refresh()
        self._say(f"Removed {entry.name} and forgot its key.")
        self.engines_changed.emit()

    def test(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        try:
            engine = self.registry.remote_engine(entry.name)
        except EngineProblem as exc:
            self._say(sentence(str(exc)), ERROR_TONE)
            return
        self.test_button.setEnabled(False)
        self._say(f"Testing {entry.name}…")
        self.work.test(engine, lambda result: self._tested(entry.name, result))

    def _tested(self, name: str, result) -> None:
        if not self._open:
            return
        self._update_buttons()
        text = probe_text(result)
        self._say(f"{name}: {text}", "" if result.ok else ERROR_TONE)

    def done(self, result: int) -> None:
        self._open = False
        super().done(result)


def _item(label: str, name: str, url: str, model: str) -> QTreeWidgetItem:
    item = QTreeWidgetItem([label, url, model])
    item.setData(0, Qt.ItemDataRole.UserRole, name)  # "" for this computer
    return item
