"""Documents in the worker: count a document's tokens and keep the part that fits.

A document is a message of the conversation. Reading it (``ReadDocument``) is a turn without an
answer, run by the same path as every answer (:meth:`engine.core.EngineCore.run_turn`): the branch
up to the document is read from the deepest snapshot on it, with progress and cancel, and the state
is saved under the document message's id. Every question asked after it, on any branch, starts
from that snapshot and reads only its own tokens. A cancelled read saves nothing.
"""

from __future__ import annotations

from engine import protocol as p
from engine.session import ModelSession
from engine.context_growth import longest_possible
from engine.document_room import ANSWER_ROOM, TEMPLATE_ROOM



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
