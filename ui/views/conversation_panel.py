"""The conversation list: search, new chat, open, rename in place (F2), delete (Del, with undo), and a
conversation's system prompt (its context menu).

Listed under date headings (Today, Yesterday, Previous 7 days…) drawn by
:class:`~ui.views.conversation_delegate.ConversationDelegate`, on the sidebar's own background.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QLineEdit, QListView, QMenu, QPushButton, QVBoxLayout,
                               QWidget)

from ui.item_models.conversation_list import ID_ROLE, ConversationListModel
from ui.theme import SPACE_S, SPACE_XS
from ui.views.conversation_delegate import ConversationDelegate

SEARCH_DELAY_MS = 150


class ConversationPanel(QWidget):
    open_requested = Signal(str)
    new_requested = Signal()
    delete_requested = Signal(str)
    search_changed = Signal(str)
    system_prompt_requested = Signal(str)  # "System prompt…" on a conversation (ui.system_prompt_editor)

    def __init__(self, model: ConversationListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE_S, SPACE_S, SPACE_XS, 0)
        layout.setSpacing(SPACE_S)
        self.new_button = QPushButton("New chat")
        self.new_button.setObjectName("new_chat")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.search = QLineEdit(placeholderText="Search", clearButtonEnabled=True)  # short: fits at any text size
        self.search.setObjectName("search")
        self.search.setToolTip("Search conversations (Ctrl+F)")
        self.search.setAccessibleName("Search conversations")
        self.list = QListView()
        self.list.setObjectName("conversation_list")
        self.list.setAccessibleName("Conversations")
        self.list.setModel(model)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setItemDelegate(ConversationDelegate(self.list))  # date headings: rows differ in height
        self.list.setMouseTracking(True)  # the row under the mouse is shown
        self.list.setFrameShape(QFrame.Shape.NoFrame)
        self.list.viewport().setBackgroundRole(QPalette.ColorRole.Window)
        self.list.setAutoFillBackground(False)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        for widget in (self.new_button, self.search, self.list):
            layout.addWidget(widget)
        self._search_timer = QTimer(self, singleShot=True, interval=SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.search.returnPressed.connect(self._open_first)
        self.new_button.clicked.connect(self.new_requested)
        self.list.activated.connect(self._activated)
        self.list.clicked.connect(self._activated)
        self.list.customContextMenuRequested.connect(self._menu)
        delete = QAction("Delete", self.list, shortcut=QKeySequence.StandardKey.Delete,
                         shortcutContext=Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self._delete_current)
        self.list.addAction(delete)

    def select(self, conversation_id: str | None) -> None:
        row = self.model.row_of(conversation_id) if conversation_id else -1
        if row >= 0:
            self.list.setCurrentIndex(self.model.index(row))
        else:
            self.list.clearSelection()

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.open_requested.emit(index.data(ID_ROLE))

    def _open_first(self) -> None:
        if self.model.rowCount():
            self.list.setFocus()
            self.list.setCurrentIndex(self.model.index(0))
            self._activated(self.model.index(0))

    def _delete_current(self) -> None:
        index = self.list.currentIndex()
        if index.isValid():
            self.delete_requested.emit(index.data(ID_ROLE))

    def _menu(self, point: QPoint) -> None:
        index = self.list.indexAt(point)
        if index.isValid():
            self.menu_for(index).popup(self.list.viewport().mapToGlobal(point))

    def menu_for(self, index: QModelIndex) -> QMenu:
        """A conversation's context menu: rename, its system prompt, delete."""
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.edit(index))
        menu.addAction("System prompt…", lambda: self.system_prompt_requested.emit(index.data(ID_ROLE)))
        menu.addAction("Delete", lambda: self.delete_requested.emit(index.data(ID_ROLE)))
        return menu
