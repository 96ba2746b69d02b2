"""What an answer stores, built from the events of the request that writes it, on either side of the pipe.

The worker keeps one for each ``AnswerTurn`` that asks it to (``AnswerTurn.keep``) and stores it before
the request's ``Finished`` goes out (:mod:`engine.requests.answer_keeper`); the app keeps one in each
:class:`app.services.pending_turn.PendingTurn`, to show the answer as it streams and to store it itself
where the worker did not (a remote engine, a worker that died). Both read the same events, so the
status, finish, error and statistics of a stored answer are decided here only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import msgspec

from engine import protocol as p
from engine.protocol.draft_spans import add_span

CUT_OFF = "cut off: the context is full"  # the mark of an answer the context ended, wherever it is shown


@dataclass(kw_only=True)
class AnswerRecord:
    """An answer being written: its text, reasoning and draft spans so far, and how its request ended."""

    started: float = field(default_factory=time.time)  # when the turn began (the app's clock: one machine)
    model: str = ""  # the name of the model writing the answer, kept in its stats (the window shows it)
    n_deltas: int = 0  # TokenDelta events taken
    draft_spans: list[list] = field(default_factory=list)  # [characters, from a draft], merged
    finished: p.Finished | None = None
    ended: bool = False  # its request's last event came (engine.protocol.ends_request)
    errors: list[str] = field(default_factory=list)
    reasoning: str = ""  # what the model thought before answering (engine.decoding.reasoning), apart from the text
    thinking_s: float | None = None  # how long it thought: from the turn's start to the answer's first text
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

    def feed(self, event: object) -> bool:
        """Take one event of the request; True once it has ended (the protocol's one rule, ``ends_request``)."""
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
        self.ended = self.ended or p.ends_request(event)
        return self.ended

    def _take_reasoning(self, event: p.TokenDelta) -> None:
        if event.reasoning:
            self.reasoning += event.reasoning
        if self.reasoning and self.thinking_s is None and event.text:
            self.thinking_s = time.time() - self.started

    def interruption(self) -> str:
        """Why the answer ended without its ``Finished`` (the engine died, the app closed); "" if it did not."""
        return ""

    @property
    def status(self) -> str:
        if self.errors and (self.finished is None or self.finished.finish_reason == "error"):
            return "error"
        if self.finished is None:
            return "interrupted"
        return "stopped" if self.finished.finish_reason == "cancelled" else "done"

    @property
    def finish(self) -> str:
        """How the answer ended (model_store.message_rows.MESSAGE_FINISHES); "" when it was cut short
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
            return self.interruption()
        return ""

    def stats(self) -> dict:
        stats: dict = {"elapsed_s": time.time() - self.started}
        if self.model:
            stats["model"] = self.model
        if self.finished is not None:
            stats.update(_finished_stats(self.finished))
        if any(drafted for _, drafted in self.draft_spans):
            stats["draft_spans"] = self.draft_spans
        if self.reasoning:
            thought = self.thinking_s if self.thinking_s is not None else time.time() - self.started
            stats["thinking_s"] = round(thought, 3)
        if self.errors:
            stats["errors"] = self.errors
        if self.finished is None and self.interruption():
            stats["interrupted_by"] = self.interruption()
        return stats

    def stored_fields(self) -> dict:
        """The answer message's fields as they are stored (``ConversationStore.update_message``)."""
        return {"content": self.text, "status": self.status, "stats": self.stats(),
                "reasoning": self.reasoning.strip(), "finish": self.finish, "error": self.error,
                "tool_part": self.tool_part}

    @property
    def tool_part(self) -> str:
        """The calls the answer made, as stored (engine.protocol.tools.tool_part); "" for none."""
        return p.tool_part(self.finished.tool_calls, "") if self.finished is not None else ""


def _finished_stats(finished: p.Finished) -> dict:
    stats: dict = {"timings": msgspec.to_builtins(finished.timings)}
    if finished.snapshot is not None:
        stats["snapshot"] = msgspec.to_builtins(finished.snapshot)
    if finished.draft is not None:
        stats["draft"] = msgspec.to_builtins(finished.draft)
    if finished.tool_problem:  # calls the model wrote were left as text: why
        stats["tool_problem"] = finished.tool_problem
    if finished.context_cut is not None:  # the next turns send the branch cut there (app.services.context_cut)
        stats["context_cut"] = msgspec.to_builtins(finished.context_cut)
    if finished.remote is not None:  # a remote engine answered: which, and with what model
        stats.update(engine=finished.remote.engine, model=finished.remote.model,
                     remote=msgspec.to_builtins(finished.remote))
    return stats


def finish_of(finished: p.Finished) -> str:
    """How a request's answer ended: its finish reason, a "length" one named by the limit that ended it
    ("max_tokens" or "context"; "length" where the engine could not tell)."""
    return (finished.cut_by or "length") if finished.finish_reason == "length" else finished.finish_reason
