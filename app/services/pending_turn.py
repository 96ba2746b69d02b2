"""A turn whose answer is being written: what it stored, what the engine sent back, and what to store.

:class:`PendingTurn` is the one record of a turn between :func:`app.services.turn.start_turn` and
:func:`app.services.turn.end_answer`, for the CLI and the GUI alike: it takes the request's events
(:meth:`PendingTurn.feed`) and says how the answer ended (status, finish, error) and its statistics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import msgspec

from engine import protocol as p
from engine.draft_spans import add_span
from app.engine_clients.client import ClientEvent, EngineDead
from model_store.conversations import Message
from model_store.writer_lock import WriterLock


@dataclass
class PendingTurn:
    """A turn whose answer is being written: its stored messages, command and what came back."""

    conversation_id: str
    user: Message
    answer: Message
    command: p.AnswerTurn
    started: float = field(default_factory=time.time)
    n_deltas: int = 0  # TokenDelta events taken
    draft_spans: list[list] = field(default_factory=list)  # [characters, from a draft], merged
    finished: p.Finished | None = None
    errors: list[str] = field(default_factory=list)
    dead: EngineDead | None = None
    writer: WriterLock | None = None  # held from start_turn until end_answer
    model: str = ""  # the name of the model writing the answer, kept in its stats (the window shows it)
    abandoned: str = ""  # why the answer was left unfinished other than by the engine's death (the app closed)
    reasoning: str = ""  # what the model thought before answering (engine.reasoning), apart from the text
    thinking_s: float | None = None  # how long it thought: from the request to the answer's first text
    _text: str = field(default="", init=False, repr=False, compare=False)  # the text as last read
    _unread: list[str] = field(default_factory=list, init=False, repr=False, compare=False)  # deltas since

    @property
    def text(self) -> str:
        """The answer so far. A delta is only kept (O(delta)); reading adds the deltas that came since
        the last read to the text read then, so neither a delta nor a read joins every delta again."""
        if self._unread:
            self._text += "".join(self._unread)
            self._unread.clear()
        return self._text

    @property
    def done(self) -> bool:
        return self.finished is not None or self.dead is not None

    def feed(self, event: ClientEvent) -> bool:
        """Take one event of this request (or the engine's death); True once the turn has ended."""
        if isinstance(event, p.TokenDelta):
            self.n_deltas += 1
            self._take_reasoning(event)
            self._unread.append(event.text)
            for length, drafted in event.draft_spans or [(len(event.text), False)]:
                add_span(self.draft_spans, length, drafted)
        elif isinstance(event, p.Error):
            self.errors.append(event.message)
        elif isinstance(event, p.Finished):
            self.finished = event
        elif isinstance(event, EngineDead):
            self.dead = event
        return self.done

    def _take_reasoning(self, event: p.TokenDelta) -> None:
        if event.reasoning:
            self.reasoning += event.reasoning
        if self.reasoning and self.thinking_s is None and event.text:
            self.thinking_s = time.time() - self.started

    @property
    def status(self) -> str:
        if self.errors and (self.finished is None or self.finished.finish_reason == "error"):
            return "error"
        if self.finished is None:
            return "interrupted"
        return "stopped" if self.finished.finish_reason == "cancelled" else "done"

    @property
    def finish(self) -> str:
        """How the answer ended (model_store.conversations.MESSAGE_FINISHES); "" when it was cut short
        by the engine's death or the app closing (the status says so)."""
        if self.status == "error":
            return "error"
        if self.finished is None:
            return ""
        return finish_of(self.finished)

    @property
    def error(self) -> str:
        """Why the answer did not finish, in words: the engine's errors, its death, or the app closing."""
        if self.status == "error":
            return "; ".join(self.errors)
        if self.status == "interrupted":
            return self.dead.message if self.dead is not None else self.abandoned
        return ""

    def stats(self) -> dict:
        stats: dict = {"elapsed_s": time.time() - self.started}
        if self.model:
            stats["model"] = self.model
        if self.finished is not None:
            stats["timings"] = msgspec.to_builtins(self.finished.timings)
            if self.finished.snapshot is not None:
                stats["snapshot"] = msgspec.to_builtins(self.finished.snapshot)
            if self.finished.draft is not None:
                stats["draft"] = msgspec.to_builtins(self.finished.draft)
            if self.finished.remote is not None:  # a remote engine answered: which, and with what model
                stats.update(engine=self.finished.remote.engine, model=self.finished.remote.model,
                             remote=msgspec.to_builtins(self.finished.remote))
        if any(drafted for _, drafted in self.draft_spans):
            stats["draft_spans"] = self.draft_spans
        if self.reasoning:
            thought = self.thinking_s if self.thinking_s is not None else time.time() - self.started
            stats["thinking_s"] = round(thought, 3)
        if self.errors:
            stats["errors"] = self.errors
        if self.finished is None and (self.dead is not None or self.abandoned):
            stats["interrupted_by"] = self.dead.message if self.dead is not None else self.abandoned
        return stats


CUT_OFF = "cut off: the context is full"  # the mark of an answer the context ended, wherever it is shown


def finish_of(finished: p.Finished) -> str:
    """How a request's answer ended: its finish reason, a "length" one named by the limit that ended it
    ("max_tokens" or "context"; "length" where the engine could not tell)."""
    return (finished.cut_by or "length") if finished.finish_reason == "length" else finished.finish_reason
