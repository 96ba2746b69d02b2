"""The events a request that reads into the state (an answer, a document read) sends: its text in
coalesced deltas, and the one event that ends it.

Token deltas are gathered until :data:`COALESCE_S` has passed since the last one went out, so a
fast model sends a few events per frame interval, not one per token; the first goes out at once.
"""

from __future__ import annotations

from engine import protocol as p
from engine.protocol.draft_spans import add_span
from engine.decoding.generation import Generation, TextDelta
from engine.protocol.reports import DraftStats, Timings

COALESCE_S = 0.025
ReadingRequest = p.Answer | p.ReadDocument  # the requests that read into the state (engine.requests.core.EngineCore.run_reading)


def run_report(command: ReadingRequest, reason: str, timings: Timings, *, run: Generation | None = None,
               snapshot: p.SnapshotReport | None = None, draft: DraftStats | None = None,
               devices: p.DevicePlan | None = None, room: p.DocumentRoom | None = None,
               context_cut: p.ContextCut | None = None) -> p.Finished | p.DocumentRead:
    """The one event that ends ``command``'s request (:func:`engine.protocol.closing_event`), with what
    the run has to report: ``DocumentRead`` for a document (``room``: why one ``too_long`` was not
    read), else ``Finished``."""
    kind, rid = command.__struct_config__.tag, command.request_id
    if isinstance(command, p.ReadDocument):
        read = timings.prompt_n if reason == "stop" else 0
        return p.closing_event(kind, rid, reason, tokens=read, timings=timings, snapshot=snapshot, room=room)
    calls = run.tool_calls if run is not None and reason == "stop" else []
    return p.closing_event(kind, rid, "tool_calls" if calls else reason, timings=timings,
                           token_ids=run.token_ids if run is not None else [], snapshot=snapshot, draft=draft,
                           devices=devices, cut_by=run.cut_by if run is not None and reason == "length" else "",
                           context_cut=context_cut, tool_calls=calls, tool_problem=run.tool_problem if run else "")


class PendingDelta:
    """Text and token counts gathered until it is time to send them."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.text = self.reasoning = ""
        self.n_tokens = self.n_from_draft = 0
        self.spans: list[list] = []  # [characters, from an accepted draft], merged
        self.last_sent: float | None = None

    def add(self, delta: TextDelta) -> None:
        self.text += delta.text
        self.reasoning += delta.reasoning
        self.n_tokens += len(delta.token_ids)
        self.n_from_draft += delta.n_from_draft
        for chars, from_draft in delta.spans:
            add_span(self.spans, chars, from_draft)

    def due(self, now: float) -> bool:
        return self.last_sent is None or now - self.last_sent >= COALESCE_S

    def take(self, now: float) -> p.TokenDelta:
        event = p.TokenDelta(request_id=self.rid, text=self.text, n_tokens=self.n_tokens,
                             n_from_draft=self.n_from_draft,
                             draft_spans=[(chars, drafted) for chars, drafted in self.spans],
                             reasoning=self.reasoning)
        self.text, self.reasoning, self.n_tokens, self.n_from_draft, self.spans, self.last_sent = "", "", 0, 0, [], now
        return event
