"""A question asked before the model is in: kept, shown in the chat as sent (marked waiting for
the model), and sent by itself when the model is ready.

While a question waits, the window counts as answering (:attr:`ChatController.generating`): the
composer offers Stop, and one question waits at a time. It is given back to the message box,
its waiting row gone, when it cannot be sent after all: the user stopped it or left its
conversation, the load failed, or the engine could not be started again. Nothing is stored until
it is sent, so a question given back leaves no trace in the conversation.

A part of :class:`ui.controller.ChatController`, kept apart from the turns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from app.engine_clients.client import new_request_id
from app.services.chat_rows import MessageRow
from model_store.conversations import Message

WAITING = "waiting"  # the waiting row's status (never stored): the message widget says "waiting for the model"


@dataclass(frozen=True)
class HeldQuestion:
    text: str
    editing: Message | None  # the earlier message it is a new version of, if it is an edit
    row_id: str  # its waiting row in the transcript


def waiting_row(text: str, conversation_id: str | None) -> MessageRow:
    """The question as the chat shows it until it is sent: the user's message, marked waiting."""
    message = Message(id=new_request_id("held"), conversation_id=conversation_id or "", parent_id=None, role="user",
                      content=text, status=WAITING, created_at=time.time(), stats={})
    return MessageRow(message, [message.id])


class QuestionHolding:
    """Mixed into the chat controller: uses its message list, its signals and its sending."""

    def _hold(self, text: str) -> None:
        row = waiting_row(text, self.conversation.id if self.conversation is not None else None)
        self.held = HeldQuestion(text, self.editing, row.message.id)
        self.messages.append(row)
        self.set_editing(None)
        self.generating_changed.emit(True)

    def _release_held(self) -> None:
        """The model is in: send the waiting question (where it was asked: leaving gives it back)."""
        held = self._take_held()
        if held is None:
            return
        if not self.before_sending():  # a remote engine the user would not send this conversation to
            self.send_refused.emit(held.text)
            return
        self.editing = held.editing
        self._send_now(held.text)

    def _give_back_held(self) -> None:
        """The waiting question cannot be sent now: back to the message box, its row out of the chat."""
        held = self._take_held()
        if held is not None:
            self.send_refused.emit(held.text)

    def _take_held(self) -> HeldQuestion | None:
        held, self.held = self.held, None
        if held is None:
            return None
        rows = self.messages.rows()
        if any(r.message.id == held.row_id for r in rows):
            self.messages.set_rows([r for r in rows if r.message.id != held.row_id])
        self.generating_changed.emit(self.generating)
        return held
