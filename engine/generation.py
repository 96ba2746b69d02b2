"""One generation: chunked prefill of the prompt, then the decode loop, as a stream of text deltas.

The loop owns nothing but the request: the :class:`~engine.session.ModelSession` holds the model,
the context and the tokens already in it. Cancellation is checked between prefill chunks and
between decode steps, so it takes effect within one step. Timings follow llama.cpp's names
(``prompt_n``/``prompt_ms`` for reading, ``gen_n``/``gen_ms`` for writing) and are raw numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import msgspec

from engine.sampling import SamplingParams, distribution, make_rng
from engine.session import ModelSession
from engine.text_stream import StopStringFilter, Utf8Stream

ProgressCallback = Callable[[int, int], None]  # (processed, total) prompt tokens
CancelCheck = Callable[[], bool]


class Timings(msgspec.Struct):
    """Raw timings of one request, in tokens and milliseconds."""

    prompt_n: int = 0
    prompt_ms: float = 0.0
    gen_n: int = 0
    gen_ms: float = 0.0
    ttft_ms: float = 0.0


@dataclass(frozen=True)
class GenerationSettings:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = 512
    stop: tuple[str, ...] = ()

    def validate(self) -> "GenerationSettings":
        self.sampling.validate()
        if self.max_tokens < 1:
            raise ValueError(f"max tokens must be at least 1, got {self.max_tokens}")
        return self


@dataclass(frozen=True)
class TextDelta:
    """New text since the previous delta and the ids of the tokens that produced it."""

    text: str
    token_ids: tuple[int, ...]


class PromptTooLongError(ValueError):
    pass


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


class Generation:
    """Iterate to stream :class:`TextDelta`; afterwards read ``finish_reason``, ``token_ids``, ``timings``."""

    def __init__(
        self,
        session: ModelSession,
        prompt_tokens: list[int],
        settings: GenerationSettings,
        *,
        on_progress: ProgressCallback | None = None,
        cancelled: CancelCheck | None = None,
        reset: bool = True,
    ) -> None:
        if not prompt_tokens:
            raise ValueError("the prompt is empty")
        held = 0 if reset else session.n_past
        if held + len(prompt_tokens) >= session.n_ctx:
            raise PromptTooLongError(
                f"the prompt needs {held + len(prompt_tokens)} tokens but the context holds {session.n_ctx}; "
                "shorten it, start a new conversation, or use a longer context"
            )
        self.reset = reset
        self.session = session
        self.prompt_tokens = prompt_tokens
        self.settings = settings.validate()
        self.on_progress = on_progress or (lambda done, total: None)
        self.cancelled = cancelled or (lambda: False)
        self.token_ids: list[int] = []
        self.pending_token: int | None = None  # the last sampled token, not yet decoded into the state
        self.finish_reason: str | None = None
        self.timings = Timings(prompt_n=len(prompt_tokens))
        self.text = ""

    def __iter__(self) -> Iterator[TextDelta]:
        start = time.perf_counter()
        if not self._prefill():
            self.finish_reason = "cancelled"
            self.timings.prompt_ms = _ms_since(start)
            return
        self.timings.prompt_ms = _ms_since(start)
        yield from self._decode(start)

    def _prefill(self) -> bool:
        session, tokens = self.session, self.prompt_tokens
        if self.reset:
            session.reset()
        chunk = session.n_batch
        for begin in range(0, len(tokens), chunk):
            if self.cancelled():
                return False
            session.feed(tokens[begin : begin + chunk])
            self.on_progress(min(begin + chunk, len(tokens)), len(tokens))
        return True

    def _decode(self, start: float) -> Iterator[TextDelta]:
        session, settings = self.session, self.settings
        rng = make_rng(settings.sampling.seed)
        utf8, stops = Utf8Stream(), StopStringFilter(settings.stop)
        decode_start = time.perf_counter()
        unsent: list[int] = []  # tokens whose text is still held back (half a character, a stop prefix)
        while True:
            token = distribution(session.last_logits(), settings.sampling).sample(rng)
            if not self.token_ids:
                self.timings.ttft_ms = _ms_since(start)
            self.pending_token = token
            if session.model.is_eog(token):
                self.finish_reason = "stop"
                break
            self.token_ids.append(token)
            unsent.append(token)
            text = stops.feed(utf8.feed(session.model.piece(token)))
            if text:
                self.text += text
                yield TextDelta(text, tuple(unsent))
                unsent.clear()
            if stops.stopped:
                self.finish_reason = "stop"
                break
            if len(self.token_ids) >= settings.max_tokens or session.n_past + 1 >= session.n_ctx:
                self.finish_reason = "length"
                break
            if self.cancelled():
                self.finish_reason = "cancelled"
                break
            session.feed([token])
            self.pending_token = None
        tail = "" if stops.stopped else stops.feed(utf8.flush()) + stops.flush()
        if tail or unsent:
            self.text += tail
            yield TextDelta(tail, tuple(unsent))
        self.timings.gen_n = len(self.token_ids)
        self.timings.gen_ms = _ms_since(decode_start)
