"""Documents in the worker: count and fit a document's tokens, read it once, snapshot the result.

A document is a message of the conversation. Reading it is a turn without an answer: the branch up
to the document is read (from the deepest snapshot on it) with progress and cancel between chunks,
and the state is saved under the document message's id. Every question asked after it, on any
branch, starts from that snapshot and reads only its own tokens. A cancelled read saves nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from engine import protocol as p
from engine.chat_template import ChatTemplateError
from engine.generation import prefill
from engine.progress import PrefillProgress
from engine.records import Timings
from engine.session import ModelSession
from engine.turns import SnapshotCursor, snapshot_report
from model_store.db import StoreError

ANSWER_ROOM = 1024  # tokens a document leaves free for the questions and answers after it
TEMPLATE_ROOM = 64  # the chat template's tokens around the document


def measure_text(session: ModelSession, command: p.MeasureText) -> p.TextMeasured:
    """The text's token count and, for ``keep`` first/last, the part that fits the budget."""
    model = session.model
    tokens = model.tokenize(command.text, add_special=False, parse_special=False)
    budget = command.budget_tokens or max(0, session.n_ctx - ANSWER_ROOM - TEMPLATE_ROOM)
    fits = len(tokens) <= budget
    if command.keep == "all" or fits:
        return p.TextMeasured(request_id=command.request_id, tokens=len(tokens), budget_tokens=budget, fits=fits,
                              kept_text="" if command.keep == "all" else command.text,
                              kept_tokens=len(tokens) if fits else 0)
    kept = tokens[:budget] if command.keep == "first" else tokens[len(tokens) - budget:]
    text = b"".join(model.piece(t) for t in kept).decode("utf-8", errors="ignore")
    return p.TextMeasured(request_id=command.request_id, tokens=len(tokens), budget_tokens=budget, fits=False,
                          kept_text=text, kept_tokens=len(kept))


class ReadingHost(Protocol):
    """What reading a document needs from the engine (:class:`engine.core.EngineCore` is one)."""

    session: ModelSession | None
    snapshot_budget: int
    emit: Callable[[p.Event], None]
    is_cancelled: Callable[[str], bool]

    def conversation_turns(self) -> SnapshotCursor: ...

    def progress_reporter(self, rid: str) -> PrefillProgress: ...

    def refresh_state_sizes(self) -> None: ...


def read_document(core: ReadingHost, command: p.ReadDocument) -> None:
    """Read the branch ending with the document and save its snapshot; always ends with DocumentRead."""
    rid = command.request_id

    def end(reason: str, tokens: int = 0, timings: Timings | None = None, report: p.SnapshotReport | None = None):
        core.emit(p.DocumentRead(request_id=rid, finish_reason=reason, tokens=tokens, timings=timings or Timings(),
                                 snapshot=report))

    if core.session is None or not command.messages or command.messages[-1].id is None:
        problem = "no model is loaded; load one first" if core.session is None else "the document message has no id"
        core.emit(p.Error(code="no_model" if core.session is None else "bad_request", message=problem, request_id=rid))
        return end("error")
    try:
        turns = core.conversation_turns()
        start = turns.begin(command.messages, answer=False)
    except (ChatTemplateError, ValueError, StoreError) as exc:
        core.emit(p.Error(code="bad_request", message=str(exc), request_id=rid))
        return end("error")
    started = time.perf_counter()
    progress, read = core.progress_reporter(rid), []
    try:
        chunks = prefill(core.session, start.new_tokens, reset=start.base is None,
                         on_progress=lambda done, total: (read.append(done), progress.chunk_done(done, total)),
                         cancelled=lambda: core.is_cancelled(rid), on_chunk_start=progress.chunk_started)
    except RuntimeError as exc:  # llama.cpp refused: the context is full
        turns.forget_live()
        core.emit(p.Error(code="generation_failed", message=f"{exc}; the document does not fit after what the "
                          "conversation already holds: start a new chat with it", request_id=rid))
        return end("error")
    finally:
        progress.close()
    timings = Timings(prompt_n=read[-1] if read else 0, prompt_ms=(time.perf_counter() - started) * 1000)
    if chunks is None:
        turns.forget_live()  # half a document: nothing is saved, the next turn starts from a snapshot
        return end("cancelled", timings=timings)
    record, notes = turns.save_end(
        lambda: turns.finish_reading(start, chunks, command.conversation_id, command.messages[-1].id),
        core.snapshot_budget, "the document's snapshot")
    core.refresh_state_sizes()
    end("stop", len(start.new_tokens), timings,
        snapshot_report(start, record, [f"{note}; questions will re-read it" for note in notes]))
