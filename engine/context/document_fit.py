"""Documents in the worker: whether a document fits, and the part of a text that does.

A document is a message of the conversation. Reading it (``ReadDocument``) is one task: measure,
read, report. It is a turn without an answer, run by the same path as every answer
(:meth:`engine.requests.core.EngineCore.run_reading`): the branch up to the document is rendered and tokenized
from the deepest snapshot on it, and :func:`check_room` measures that real prompt against the
context (grown as far as the memory allows, when the command lets it grow) with room for questions.
One that does not fit ends ``too_long`` with the numbers (:class:`engine.protocol.DocumentRoom`)
and nothing read. One that fits is read with progress and cancel, and the state is saved under the
document message's id. Every question asked after it, on any branch, starts from that snapshot and
reads only its own tokens. A cancelled read saves nothing.

``MeasureText`` cuts the first or last part of a text that fits a budget (the app reads such a part
after a ``too_long``), or counts a text.
"""

from __future__ import annotations

from engine import protocol as p
from engine.models.session import ModelSession
from engine.context.context_growth import longest_possible
from engine.protocol.document_room import ANSWER_ROOM, TEMPLATE_ROOM


class DocumentDoesNotFit(Exception):
    """A document read that would not leave room for questions: ``room`` says by how much."""

    def __init__(self, room: p.DocumentRoom) -> None:
        super().__init__(f"the document has {room.tokens:,} tokens; the context leaves room for {room.budget_tokens:,}")
        self.room = room


def check_room(session: ModelSession, command: p.ReadDocument, prompt_end: int) -> None:
    """Raise :class:`DocumentDoesNotFit` unless the rendered branch, ``prompt_end`` tokens ending with
    the document, leaves :data:`ANSWER_ROOM` free: in the context as it is, or (``command.grow``) in
    the longest one the memory holds now."""
    document = command.messages[-1].content
    tokens = len(session.model.tokenize(document, add_special=False, parse_special=False))
    held = max(0, prompt_end - tokens)
    room = p.DocumentRoom(tokens=tokens, held_tokens=held, budget_tokens=max(0, session.n_ctx - ANSWER_ROOM - held),
                          grown_budget_tokens=max(0, longest_possible(session) - ANSWER_ROOM - held))
    if tokens > (room.grown_budget_tokens if command.grow else room.budget_tokens):
        raise DocumentDoesNotFit(room)


def measure_text(session: ModelSession, command: p.MeasureText) -> p.TextMeasured:
    """The text's token count and, for ``keep`` first/last, the part that fits the budget."""
    model = session.model
    tokens = model.tokenize(command.text, add_special=False, parse_special=False)
    budget = command.budget_tokens or max(0, session.n_ctx - ANSWER_ROOM - TEMPLATE_ROOM)
    grown = budget + longest_possible(session) - session.n_ctx
    fits = len(tokens) <= budget
    if command.keep == "all" or fits:
        return p.TextMeasured(request_id=command.request_id, tokens=len(tokens), budget_tokens=budget, fits=fits,
                              kept_text="" if command.keep == "all" else command.text,
                              kept_tokens=len(tokens) if fits else 0, grown_budget_tokens=grown)
    kept = tokens[:budget] if command.keep == "first" else tokens[len(tokens) - budget:]
    text = b"".join(model.piece(t) for t in kept).decode("utf-8", errors="ignore")
    return p.TextMeasured(request_id=command.request_id, tokens=len(tokens), budget_tokens=budget, fits=False,
                          kept_text=text, kept_tokens=len(kept), grown_budget_tokens=grown)
