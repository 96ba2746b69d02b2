"""The conversation list as a Qt model: titles, newest first, editable in place (rename).

Each row also says under which date heading it is listed (:data:`GROUP_ROLE`: Today, Yesterday,
Previous 7 days… by its last activity, :mod:`ui.item_models.date_groups`) and whether it is the
first of its group (:data:`STARTS_GROUP_ROLE`); the list's delegate draws the heading above that row.
The headings are not rows, so a row is a conversation everywhere (selection, keyboard, search).
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from model_store.conversations import Conversation
from ui.item_models.date_groups import group_of_timestamp

ID_ROLE = Qt.ItemDataRole.UserRole + 1
GROUP_ROLE = Qt.ItemDataRole.UserRole + 2  # "Today", "Yesterday", "Previous 7 days", …
STARTS_GROUP_ROLE = Qt.ItemDataRole.UserRole + 3  # the first row under its heading
Index = QModelIndex | QPersistentModelIndex


class ConversationListModel(QAbstractListModel):
    rename_requested = Signal(str, str)  # (conversation id, new title)

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[Conversation] = []
        self._hidden: set[str] = set()  # deleted, but the user can still undo

    def set_conversations(self, conversations: list[Conversation]) -> None:
        self.beginResetModel()
        self._rows = [c for c in conversations if c.id not in self._hidden]
        self.endResetModel()

    def put_first(self, conversation: Conversation) -> None:
        """Show ``conversation`` as it is now, at the top (the newest used): a turn started in it."""
        if conversation.id in self._hidden:
            return
        row = self.row_of(conversation.id)
        if row > 0:
            self.beginMoveRows(QModelIndex(), row, row, QModelIndex(), 0)
            del self._rows[row]
            self._rows.insert(0, conversation)
            self.endMoveRows()
        elif row < 0:
            self.beginInsertRows(QModelIndex(), 0, 0)
            self._rows.insert(0, conversation)
            self.endInsertRows()
        self._rows[0] = conversation
        self.dataChanged.emit(self.index(0), self.index(min(1, len(self._rows) - 1)))  # the next row's heading too

    def conversation(self, row: int) -> Conversation:
        return self._rows[row]

    def row_of(self, conversation_id: str) -> int:
        return next((i for i, c in enumerate(self._rows) if c.id == conversation_id), -1)

    def ids(self) -> list[str]:
        return [c.id for c in self._rows]

    def hide(self, conversation_id: str) -> None:
        """Take a conversation out of the list (a delete that can still be undone)."""
        self._hidden.add(conversation_id)
        row = self.row_of(conversation_id)
        if row >= 0:
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._rows[row]
            self.endRemoveRows()

    def unhide(self, conversation_id: str) -> None:
        self._hidden.discard(conversation_id)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        conversation = self._rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return conversation.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{conversation.title}\nmodel: {conversation.model}"
        if role == ID_ROLE:
            return conversation.id
        if role in (GROUP_ROLE, Qt.ItemDataRole.AccessibleDescriptionRole):
            return self.group(index.row())
        if role == STARTS_GROUP_ROLE:
            return index.row() == 0 or self.group(index.row() - 1) != self.group(index.row())
        return None

    def group(self, row: int) -> str:
        """The date heading ``row`` is listed under (by its last activity)."""
        return group_of_timestamp(self._rows[row].updated_at)

    def flags(self, index: Index) -> Qt.ItemFlag:
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable

    def setData(self, index: Index, value, role: int = Qt.ItemDataRole.EditRole) -> bool:
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not title:
            return False
        old = self._rows[index.row()]
        if title == old.title:
            return False
        self._rows[index.row()] = replace(old, title=title)  # every other field as it was (its system prompt too)
        self.dataChanged.emit(index, index)
        self.rename_requested.emit(old.id, title)
        return True
