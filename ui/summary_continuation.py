"""A turn that does not fit, with Settings → Chat's "continue in a new conversation": the window's side
of :mod:`app.services.summary_flow`.

The worker refuses the turn (``context_full``; the question stays in the old conversation, marked
with the reason). Instead of that error, the status line says a summary is being written, with its
words so far; then the new conversation "TITLE (continued)" is shown and the message is sent there,
as if the user had sent it. The old conversation stays in the list as it was. If no summary can be
written, the banner says why and the message goes back to the message box.

A part of :class:`ui.controller.ChatController`, kept apart from the turns.
"""

from __future__ import annotations

from app.engine_clients.client import EngineDead
from app.services.pending_turn import PendingTurn
from app.services.summary_flow import Continuing
from app.services.turn_start import NewMessage
from engine import protocol as p
from model_store.conversations import Conversation


def continues_after(turn: PendingTurn, event: p.Event) -> bool:
    """Whether ``event`` refuses ``turn`` for being too long, with the choice to continue in a new conversation."""
    return isinstance(event, p.Error) and event.code == "context_full" and turn.command.when_full == "summary"


class SummaryContinuation:
    """Mixed into the chat controller: uses its signals, its turns and :attr:`summary_flow`."""

    def _continue_later(self, turn: PendingTurn) -> None:
        """The turn was refused for its length: once it is stored, the conversation continues in a new one."""
        self._continuing.add(turn.command.request_id)
        self.status.emit("This conversation is longer than the model can read: writing a summary of it to "
                         "continue in a new conversation…")

    def _maybe_continue(self, turn: PendingTurn) -> None:
        if turn.command.request_id in self._continuing:
            self._continuing.discard(turn.command.request_id)
            self.summary_flow.begin(turn.conversation_id, turn.user.content, self._options(), model=self.model_ref)

    def summary_progress(self, continuing: Continuing) -> None:
        words = len(continuing.written.split())
        self.status.emit(f"Writing a summary of “{continuing.old.title}” to continue in a new conversation: "
                         f"{words:,} word{'s' if words != 1 else ''} so far…")

    def summary_ready(self, continuing: Continuing, conversation: Conversation) -> None:
        self.status.emit("")
        self._begin(NewMessage(continuing.text, conversation.id, continuing.options, model=continuing.model))

    def summary_failed(self, continuing: Continuing, why: str) -> None:
        self.status.emit("")
        self.generating_changed.emit(self.generating)
        self.conversation_notice.emit("error", f"This conversation is longer than the model can read, and it could "
                                               f"not continue in a new one: {why.rstrip('.')}. Your message is back "
                                               "in the message box.")
        self.send_refused.emit(continuing.text)

    def _summary_engine_died(self, dead: EngineDead) -> None:
        self.summary_flow.engine_died(dead)
