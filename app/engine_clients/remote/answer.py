"""One answer from a remote engine, as the worker's events: the request's body, then its stream
read into ``TokenDelta`` events and one ``Finished`` with timings measured here (TTFT from the
request to the first text, decode speed between the first and the last piece).

A stop shuts the connection down at once, whatever the server is doing (the server stops
generating; one gone silent cannot hold the stop: :class:`~app.engine_clients.remote.api.Interrupt`);
a failure after text has arrived keeps that text (it was already sent as deltas) and ends the
answer with ``error``. An engine that goes on past ``max_tokens`` (or sends more text than that
many tokens hold) has its stream closed here (:mod:`app.engine_clients.remote.limits`). Only the
standard sampling fields are sent (temperature, top_p, seed); top_k and min_p are Hearth's own and
not every server takes them, so the engine's defaults apply to those. An answer held to a JSON schema
asks the server for it with OpenAI's ``response_format``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack

from engine import protocol as p
from engine.protocol.reports import Timings
from app.engine_clients.remote.api import Interrupt, OpenAIApi, OpenStream
from app.engine_clients.remote.errors import RemoteError
from app.engine_clients.remote.limits import AnswerBudget
from app.engine_clients.remote.retry import RetryPolicy, with_retries

Emit = Callable[[p.Event], None]


def request_body(command: p.Answer, model: str) -> tuple[str, dict]:
    """The API path and JSON body for ``command``, streamed, with usage asked for."""
    body: dict = {"model": model, "max_tokens": command.max_tokens, "temperature": command.sampling.temperature,
                  "top_p": command.sampling.top_p, "stream": True, "stream_options": {"include_usage": True}}
    if command.sampling.seed is not None:
        body["seed"] = command.sampling.seed
    if command.stop:
        body["stop"] = list(command.stop)
    body.update(constraint_fields(command.constraint))
    if isinstance(command, p.Complete):
        return "completions", {**body, "prompt": command.prompt}
    return "chat/completions", {**body, "messages": [_message(m) for m in command.messages]}


def constraint_fields(constraint: p.OutputConstraint | None) -> dict:
    """The answer's shape as OpenAI-compatible servers take it: ``response_format`` (a schema ``strict``,
    so the server holds the answer to it as Hearth would), or llama.cpp's ``grammar`` field."""
    if constraint is None:
        return {}
    if constraint.kind == "json":
        return {"response_format": {"type": "json_object"}}
    if constraint.kind == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": constraint.name or "answer", "schema": json.loads(constraint.schema), "strict": True}}}
    return {"grammar": constraint.grammar}


def _message(turn: p.WireMessage) -> dict:
    """A message as OpenAI-compatible servers take it; an answer's reasoning as llama.cpp's server and vLLM do."""
    message = {"role": turn.role, "content": turn.content}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    return message


def chunk_reasoning(chunk: dict) -> str:
    """The new reasoning of a chat chunk (``delta.reasoning_content``, as llama.cpp's server, vLLM and
    DeepSeek's API send it); "" when it has none."""
    choices = chunk.get("choices") or []
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    reasoning = delta.get("reasoning_content") if isinstance(delta, dict) else None
    return reasoning if isinstance(reasoning, str) else ""


def chunk_text(chunk: dict) -> tuple[str, str | None]:
    """The new text of a chat or completion chunk, and its finish reason if it has one."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return "", None
    choice = choices[0]
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return (text if isinstance(text, str) else ""), choice.get("finish_reason")


class AnswerStream:
    """Reads one answer; :meth:`stop` may be called from another thread."""

    def __init__(self, api: OpenAIApi, model: str, policy: RetryPolicy, emit: Emit,
                 on_progress: Callable[[AnswerStream], None] | None = None) -> None:
        self.api, self.model, self.policy, self.emit = api, model, policy, emit
        self.on_progress = on_progress
        self.stopped = threading.Event()
        self._interrupt = Interrupt()
        self._open: OpenStream | None = None
        self.started = self.first_at = self.last_at = 0.0
        self.n_pieces = 0
        self.usage: dict = {}
        self.budget = AnswerBudget(1)  # the request's, once it runs

    def stop(self) -> None:
        self.stopped.set()
        self._interrupt.fire()  # wakes a read blocked on a silent server (closing the response does not)
        opened = self._open
        if opened is not None:
            try:
                opened.response.close()  # the blocked read ends; the server sees the connection close
            except Exception:  # noqa: BLE001 - closing a connection that is going away anyway
                pass

    @property
    def decode_tok_s(self) -> float:
        span = self.last_at - self.first_at
        return (self.n_pieces - 1) / span if self.n_pieces > 1 and span > 0 else 0.0

    @property
    def ttft_ms(self) -> float:
        return (self.first_at - self.started) * 1000 if self.first_at else 0.0

    def run(self, command: p.Answer) -> None:
        """Stream ``command``'s answer as events, ending with ``Finished`` whatever happens."""
        rid = command.request_id
        path, body = request_body(command, self.model)
        self.budget = AnswerBudget(command.max_tokens)
        self.started = time.perf_counter()
        reason = "length"
        try:
            reason = self._read(rid, path, body)
        except RemoteError as error:
            if self.stopped.is_set():
                reason = "cancelled"
            else:
                self.emit(p.Error(code=error.code, message=str(error), request_id=rid))  # Finished follows
                reason = "error"
        if self.stopped.is_set() and reason != "error":
            reason = "cancelled"
        timings = self._timings()
        self.emit(p.Finished(request_id=rid, finish_reason=reason, timings=timings, devices=None,
                             remote=self._report(), cut_by=self._cut_by(reason, command.max_tokens)))

    def _cut_by(self, reason: str, max_tokens: int) -> str:
        """What ended a "length" answer, from the tokens the server counted: fewer than ``max_tokens``
        means its context was full; "" where it did not say (no usage) or for another finish."""
        written = self.usage.get("completion_tokens")
        if reason == "length" and self.budget.exceeded:
            return "max_tokens"
        if reason != "length" or not isinstance(written, int):
            return ""
        return "max_tokens" if written >= max_tokens else "context"

    def _read(self, rid: str, path: str, body: dict) -> str:
        with ExitStack() as stack:
            def attempt() -> OpenStream:
                return stack.enter_context(self.api.stream(path, body, self._interrupt))

            opened = with_retries(self.policy, attempt, self.stopped,
                                  on_wait=lambda error, wait, attempt: self._waiting(rid, error, wait, attempt))
            self._open = opened
            if self.stopped.is_set():
                return "cancelled"
            reason = None
            try:
                for chunk in opened.chunks:
                    text, finish = chunk_text(chunk)
                    reasoning = chunk_reasoning(chunk)
                    reason = finish or reason
                    if isinstance(chunk.get("usage"), dict):
                        self.usage = chunk["usage"]
                        self.budget.saw_usage(self.usage)
                    if text or reasoning:
                        text, reasoning = self.budget.take(text, reasoning)
                        if text or reasoning:
                            self._took(rid, text, reasoning)
                    if self.budget.exceeded:  # leaving the block closes the connection
                        return "length"
            except RemoteError:
                raise
            except Exception:  # noqa: BLE001 - the read ended because stop() closed the connection
                if not self.stopped.is_set():
                    raise
                return "cancelled"
            finally:
                self._open = None
        return "length" if reason == "length" else "stop"

    def _waiting(self, rid: str, error: RemoteError, wait: float, attempt: int) -> None:
        said = str(error).split("; try again", 1)[0]  # the engine's state, without advice the retry makes moot
        self.emit(p.RemoteWaiting(request_id=rid, message=f"{said}; trying again in {wait:g} s (try {attempt} "
                                                          f"of {self.policy.attempts})", wait_s=wait, attempt=attempt))

    def _took(self, rid: str, text: str, reasoning: str = "") -> None:
        now = time.perf_counter()
        self.first_at = self.first_at or now
        self.last_at = now
        self.n_pieces += 1
        self.emit(p.TokenDelta(request_id=rid, text=text, n_tokens=1, reasoning=reasoning))
        if self.on_progress is not None:
            self.on_progress(self)

    def _timings(self) -> Timings:
        gen_n = self.usage.get("completion_tokens")
        prompt = self.usage.get("prompt_tokens")
        return Timings(prompt_n=prompt if isinstance(prompt, int) else 0, prompt_ms=self.ttft_ms,
                       gen_n=int(gen_n) if isinstance(gen_n, int) else self.n_pieces,
                       gen_ms=(self.last_at - self.first_at) * 1000 if self.first_at else 0.0, ttft_ms=self.ttft_ms)

    def _report(self) -> p.RemoteReport:
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        prompt = self.usage.get("prompt_tokens")
        return p.RemoteReport(engine=self.api.engine.name, model=self.model,
                              prompt_tokens=prompt if isinstance(prompt, int) else None,
                              cached_tokens=cached if isinstance(cached, int) else None,
                              closed_by_hearth=self.budget.exceeded)
