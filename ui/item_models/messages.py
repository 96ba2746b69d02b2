"""The transcript shown in the chat view: the messages on the conversation's current branch.

Each row also knows the other versions of its message (edits and regenerations are siblings in the
store's message tree), so the view can offer "‹ 2/3 ›" to switch between them. A streaming answer
is updated in place, row by row, without reloading the branch.

While an answer streams, each delta is appended (:meth:`MessageListModel.append_text`) at a cost
in proportion to the delta, not to the answer: the row keeps the pieces and builds its ``Message``
again only when someone reads the row. ``textAppended`` carries the row and the new text, so the
chat view extends what it shows instead of re-reading the whole answer; ``dataChanged`` follows
with :data:`APPENDED_ROLES`, which such a view skips. The stored answer replaces the row at the
end of the turn (:meth:`~MessageListModel.update_message`).

A reasoning model's thinking (``Message.reasoning``, apart from the answer's text) streams the same
way, by :meth:`~MessageListModel.append_reasoning` and ``reasoningAppended``; it is not the row's
display text, so no ``dataChanged`` follows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from app.services.context_cut import cut_totals
from app.services.chat_rows import MessageRow
from engine.protocol.answer_record import CUT_OFF
from model_store.conversations import Message

Index = QModelIndex | QPersistentModelIndex
APPENDED_ROLES = [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole]  # what an append changes


@dataclass
class _Tail:
    """What was appended to a row's message since its ``Message`` was last built."""

    pieces: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # reasoning appended, apart from the text
    stats: dict | None = None  # the live stats that came with the last piece


class MessageListModel(QAbstractListModel):
    textAppended = Signal(int, str, object)  # (row, text added to its message, its live stats or None)
    reasoningAppended = Signal(int, str)  # (row, reasoning added to its message)

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[MessageRow] = []
        self._tails: dict[int, _Tail] = {}  # row → appended text not yet in its Message

    def set_rows(self, rows: list[MessageRow]) -> None:
        """Show ``rows``. When they continue what is shown (a new turn), only the changed and added
        rows are signalled, so the view does not rebuild (and re-measure) the whole transcript."""
        self._fold_all()
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
        self._fold(i)
        return self._rows[i]

    def rows(self) -> list[MessageRow]:
        self._fold_all()
        return list(self._rows)

    def find(self, message_id: str) -> int:
        """The row of a message, or -1; searched from the newest (where answers stream)."""
        return next((i for i in range(len(self._rows) - 1, -1, -1) if self._rows[i].message.id == message_id), -1)

    def update_message(self, message: Message) -> None:
        """Show a message's new text, status or stats (a stored result): the row takes ``message`` whole."""
        i = self.find(message.id)
        if i < 0:
            return
        self._tails.pop(i, None)
        self._rows[i] = replace(self._rows[i], message=message, left_out=self._left_out(i, message))
        index = self.index(i)
        self.dataChanged.emit(index, index)

    def _left_out(self, i: int, message: Message) -> int:
        """What a cut made by row ``i``'s turn leaves out in all (app.services.context_cut), counted on the rows shown."""
        branch = [*(r.message for r in self._rows[:i]), message]
        return cut_totals(branch, [r.document.message_id for r in self._rows if r.document is not None])[-1]

    def append_text(self, message_id: str, text: str, stats: dict | None = None) -> None:
        """Add ``text`` to the end of a message being written, with the message's live ``stats`` (if
        given). Costs O(len(text)): nothing re-joins the answer (unless a listener reads the row)."""
        i = self.find(message_id)
        if i < 0:
            return
        tail = self._tails.setdefault(i, _Tail())
        tail.pieces.append(text)
        if stats is not None:
            tail.stats = stats
        self.textAppended.emit(i, text, stats)
        index = self.index(i)
        self.dataChanged.emit(index, index, APPENDED_ROLES)

    def append_reasoning(self, message_id: str, text: str) -> None:
        """Add ``text`` to the reasoning of a message being written (O(len(text)), as :meth:`append_text`)."""
        i = self.find(message_id)
        if i < 0 or not text:
            return
        self._tails.setdefault(i, _Tail()).reasoning.append(text)
        self.reasoningAppended.emit(i, text)

    def _fold(self, i: int) -> None:
        """Build row ``i``'s Message again with what was appended to it (when someone reads it)."""
        tail = self._tails.pop(i, None)
        if tail is None:
            return
        message = self._rows[i].message
        self._rows[i] = replace(self._rows[i], message=replace(
            message, content=message.content + "".join(tail.pieces),
            reasoning=message.reasoning + "".join(tail.reasoning),
            stats=tail.stats if tail.stats is not None else message.stats))

    def _fold_all(self) -> None:
        for i in list(self._tails):
            self._fold(i)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        message = self.row(index.row()).message
        if role == Qt.ItemDataRole.DisplayRole:
            return message.content
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"{message.role}: {message.content}" + (f" ({CUT_OFF})" if message.cut_off else "")
        return None
