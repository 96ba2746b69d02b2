"""A turn whose answer is being written: what it stored, what the engine sent back, and what to store.

:class:`PendingTurn` is the one record of a turn between :func:`app.services.turn.start_turn` and
:func:`app.services.turn.end_answer`, for the CLI, the GUI and ``hearth serve`` alike. It is an
:class:`engine.protocol.answer_record.AnswerRecord` (the answer as the request's events build it, the same
record the worker stores from) with what only the app knows: the stored messages, the command, the
conversation's writer lock, and why an answer was cut short without its ``Finished``.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from engine import protocol as p
from engine.protocol.answer_record import AnswerRecord
from app.engine_clients.client import ClientEvent, EngineDead
from model_store.conversations import Message
from model_store.writer_lock import WriterLock


@dataclass
class PendingTurn(AnswerRecord):
    """A turn whose answer is being written: its stored messages, command and what came back."""

    conversation_id: str
    user: Message
    answer: Message
    command: p.AnswerTurn
    dead: EngineDead | None = None
    writer: WriterLock | None = None  # held from start_turn until the answer is stored
    abandoned: str = ""  # why the answer was left unfinished other than by the engine's death (the app closed)

    @property
    def done(self) -> bool:
        return self.ended or self.dead is not None

    def feed(self, event: ClientEvent) -> bool:
        """Take one event of this request (or the engine's death); True once the turn has ended."""
        if isinstance(event, EngineDead):
            self.dead = event
        else:
            super().feed(event)
        return self.done

    def interruption(self) -> str:
        return self.dead.message if self.dead is not None else self.abandoned

    @property
    def stored_by_engine(self) -> bool:
        """Whether the worker stored the answer itself before its ``Finished`` (``Finished.answer_stored``)."""
        return self.finished is not None and self.finished.answer_stored

    def outgoing(self) -> p.AnswerTurn:
        """The command as it is sent: it asks the worker to store the answer under this turn's writer lock."""
        keep = p.KeepAnswer(writer_token=self.writer.token if self.writer is not None else "",
                            model=self.model, started_at=self.started)
        return msgspec.structs.replace(self.command, keep=keep)
