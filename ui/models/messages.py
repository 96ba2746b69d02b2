"""The transcript shown in the chat view: the messages on the conversation's current branch.

Each row also knows the other versions of its message (edits and regenerations are siblings in the
store's message tree), so the view can offer "‹ 2/3 ›" to switch between them. A streaming answer
is updated in place, row by row, without reloading the branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from model_store.conversations import ConversationStore, Message
from model_store.documents import Document, DocumentStore

Index = QModelIndex | QPersistentModelIndex


@dataclass
class MessageRow:
    message: Message
    sibling_ids: list[str] = field(default_factory=list)  # every version at this fork, oldest first
    document: Document | None = None  # the document this message holds, if it is one

    @property
    def version(self) -> int:
        """1-based position among its versions."""
        return self.sibling_ids.index(self.message.id) + 1 if self.message.id in self.sibling_ids else 1

    @property
    def versions(self) -> int:
        return max(1, len(self.sibling_ids))


def load_transcript(store: ConversationStore, conversation_id: str) -> list[MessageRow]:
    """Read the current branch with each message's versions and documents (runs on the store thread)."""
    documents = DocumentStore(store.db)
    rows = []
    for message in store.current_branch(conversation_id):
        document = documents.for_message(message.id) if message.role == "user" else None
        rows.append(MessageRow(message, [s.id for s in store.siblings(message.id)], document))
    return rows


class MessageListModel(QAbstractListModel):
    def __init__(self) -> None:
        super().__init__()
        self._rows: list[MessageRow] = []

    def set_rows(self, rows: list[MessageRow]) -> None:
        """Show ``rows``. When they continue what is shown (a new turn), only the changed and added
        rows are signalled, so the view does not rebuild (and re-measure) the whole transcript."""
        shown = [r.message.id for r in self._rows]
        if not shown or [r.message.id for r in rows[:len(shown)]] != shown:
            self.beginResetModel()
            self._rows = list(rows)
            self.endResetModel()
            return
        for i, row in enumerate(rows[:len(shown)]):
            if row != self._rows[i]:
                self._rows[i] = row
                self.dataChanged.emit(self.index(i), self.index(i))
        if len(rows) > len(shown):
            self.beginInsertRows(QModelIndex(), len(shown), len(rows) - 1)
            self._rows.extend(rows[len(shown):])
            self.endInsertRows()

    def append(self, row: MessageRow) -> None:
        at = len(self._rows)
        self.beginInsertRows(QModelIndex(), at, at)
        self._rows.append(row)
        self.endInsertRows()

    def row(self, i: int) -> MessageRow:
        return self._rows[i]

    def rows(self) -> list[MessageRow]:
        return list(self._rows)

    def find(self, message_id: str) -> int:
        return next((i for i, r in enumerate(self._rows) if r.message.id == message_id), -1)

    def update_message(self, message: Message) -> None:
        """Show a message's new text, status or stats (a streaming answer, a stored result)."""
        i = self.find(message.id)
        if i < 0:
            return
        self._rows[i] = replace(self._rows[i], message=message)
        index = self.index(i)
        self.dataChanged.emit(index, index)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        message = self._rows[index.row()].message
        if role == Qt.ItemDataRole.DisplayRole:
            return message.content
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"{message.role}: {message.content}"
        return None
