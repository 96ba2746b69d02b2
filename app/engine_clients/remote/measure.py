"""Counting a text's tokens on a remote engine, for documents (``MeasureText``, and the measuring
that starts a ``ReadDocument``).

Servers that can count say so at different addresses: llama.cpp's server and vLLM at ``/tokenize``,
llama-cpp-python at ``/extras/tokenize/count``; Ollama and Hearth's own API cannot. The first that
answers is remembered. Where none does, the count is an estimate (a token per three characters,
more than most tokenizers need for prose, so a document judged to fit does) and says so.
"""

from __future__ import annotations

import math

from engine import protocol as p
from engine.protocol.document_room import ANSWER_ROOM, TEMPLATE_ROOM
from app.engine_clients.remote.api import OpenAIApi
from app.engine_clients.remote.errors import RemoteError

CHARS_PER_TOKEN_ESTIMATE = 3


def estimated_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN_ESTIMATE)


class TokenCounter:
    def __init__(self, api: OpenAIApi, model: str) -> None:
        self.api, self.model = api, model
        self._way: str | None = None  # the endpoint that worked; "estimate" when none does

    def count(self, text: str) -> tuple[int, bool]:
        """``(tokens, exact)``."""
        ways = [self._way] if self._way else ["tokenize", "extras/tokenize/count", "estimate"]
        for way in ways:
            if way == "estimate":
                self._way = way
                return estimated_tokens(text), False
            counted = self._ask(way, text)
            if counted is not None:
                self._way = way
                return counted, True
        return estimated_tokens(text), False

    def _ask(self, way: str, text: str) -> int | None:
        body = {"input": text} if way.startswith("extras") else {"model": self.model, "prompt": text, "content": text}
        try:
            answer = self.api.post_json(self.api.root_url(way), body)
        except RemoteError as error:
            if error.code in ("remote_unreachable", "remote_tls", "remote_auth", "remote_timeout"):
                raise
            return None  # this server has no such endpoint
        if not isinstance(answer, dict):
            return None
        if isinstance(answer.get("count"), int):
            return answer["count"]
        tokens = answer.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None


def text_measured(counter: TokenCounter, command: p.MeasureText, n_ctx: int) -> p.TextMeasured:
    """The worker's answer to ``MeasureText``, for a remote engine whose context is ``n_ctx`` and
    cannot grow. A first or last part is cut by characters in proportion, then counted again."""
    budget = command.budget_tokens or max(0, n_ctx - ANSWER_ROOM - TEMPLATE_ROOM)
    tokens, _exact = counter.count(command.text)
    fits = tokens <= budget
    if command.keep == "all" or fits:
        return p.TextMeasured(request_id=command.request_id, tokens=tokens, budget_tokens=budget, fits=fits,
                              kept_text="" if command.keep == "all" else command.text,
                              kept_tokens=tokens if fits else 0, grown_budget_tokens=budget)
    kept, kept_tokens = _part_that_fits(counter, command.text, command.keep, tokens, budget)
    return p.TextMeasured(request_id=command.request_id, tokens=tokens, budget_tokens=budget, fits=False,
                          kept_text=kept, kept_tokens=kept_tokens, grown_budget_tokens=budget)


def document_room(counter: TokenCounter, command: p.ReadDocument, n_ctx: int) -> p.DocumentRoom:
    """What the remote engine's context (``n_ctx``, which cannot grow) leaves for the document that
    ends ``command``'s branch: the messages before it are counted, the template estimated."""
    tokens, _exact = counter.count(command.messages[-1].content) if command.messages else (0, True)
    before = "\n".join(message.content for message in command.messages[:-1])
    held = (counter.count(before)[0] if before else 0) + TEMPLATE_ROOM
    budget = max(0, n_ctx - ANSWER_ROOM - held)
    return p.DocumentRoom(tokens=tokens, held_tokens=held, budget_tokens=budget, grown_budget_tokens=budget)


def _part_that_fits(counter: TokenCounter, text: str, keep: str, tokens: int, budget: int) -> tuple[str, int]:
    share = budget / max(1, tokens)
    for _ in range(6):  # shrink until the count agrees
        chars = int(len(text) * share)
        part = text[:chars] if keep == "first" else text[len(text) - chars:]
        counted, _exact = counter.count(part)
        if counted <= budget:
            return part, counted
        share *= 0.9 * budget / counted
    return "", 0
