"""One generation: chunked prefill of the prompt, then the decode loop, as a stream of text deltas.

The loop owns nothing but the request: the :class:`~engine.models.session.ModelSession` holds the model,
the context and the tokens already in it. Cancellation is checked between decode steps and while
a prefill chunk is computed (llama.cpp's abort callback), so it takes effect within one step. Who
reads the prompt is a parameter (``prefiller``, by default :func:`prefill` on the CPU): the NPU
path (:mod:`engine.npu.service`) plugs in there and hands the state to the same context, so
decoding never knows. Timings follow llama.cpp's names (``prompt_n``/``prompt_ms`` for reading,
``gen_n``/``gen_ms`` for writing) and are raw numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from engine import protocol as p
from engine.protocol.draft_spans import add_span
from engine.protocol.limits import EXACT_ROWS
from engine.backends import row_kernels
from engine.backends.llama_context import DecodeAborted
from engine.protocol.reports import Timings
from engine.decoding.constraint import ConstraintFactory
from engine.decoding.tool_use import CallSplitter, ToolUse
from engine.decoding.sampling import SamplingParams, make_rng
from engine.models.session import FULL_ROWS_TAIL, ModelSession
from engine.speculative.token_sources import PlainSource
from engine.decoding.reasoning import ReasoningSplitter, ReasoningStart
from engine.decoding.text_stream import StopStringFilter, Utf8Stream

ProgressCallback = Callable[[int, int], None]  # (processed, total) prompt tokens
ChunkCallback = Callable[[int, int, int], None]  # (processed so far, chunk length, total) as a chunk starts
CancelCheck = Callable[[], bool]


class Prefiller(Protocol):
    """Reads ``tokens`` into the session (see :func:`prefill`): the chunk lengths, or None if cancelled."""

    def __call__(self, session: ModelSession, tokens: list[int], *, reset: bool, on_progress: ProgressCallback,
                 cancelled: CancelCheck, on_chunk_start: ChunkCallback | None = None,
                 logits_read: bool = True) -> list[int] | None: ...


@dataclass(frozen=True)
class GenerationSettings:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = p.DEFAULTS.max_tokens
    stop: tuple[str, ...] = ()
    reasoning: ReasoningStart = "off"  # how the answer's reasoning is told from it (engine.decoding.reasoning)
    constraint: ConstraintFactory | None = None  # makes the answer's grammar state (engine.decoding.constraint)
    tools: ToolUse | None = None  # the tools the answer may call (engine.decoding.tool_use)

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
    n_from_draft: int = 0  # of those tokens, how many were accepted draft tokens
    spans: tuple[tuple[int, bool], ...] = ()  # (characters, from an accepted draft) covering text
    reasoning: str = ""  # new reasoning text (it comes before ``text``, which is the answer's)


class PromptTooLongError(ValueError):
    pass


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


class Generation:
    """Iterate to stream :class:`TextDelta`; afterwards read ``finish_reason``, ``token_ids``, ``timings``
    (and for a ``"length"`` finish, ``cut_by``: the request's ``max_tokens`` or the full context)."""

    def __init__(
        self,
        session: ModelSession,
        prompt_tokens: list[int],
        settings: GenerationSettings,
        *,
        on_progress: ProgressCallback | None = None,
        cancelled: CancelCheck | None = None,
        on_chunk_start: ChunkCallback | None = None,
        reset: bool = True,
        make_source=None,
        prefiller: Prefiller | None = None,
        writes: bool = True,
        checkpoint: int = 0,
        on_checkpoint: Callable[[list[int]], None] | None = None,
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
        self.writes = writes  # False: read the prompt and stop (a document read into the state)
        self.make_source = make_source  # (session, sampling, rng) -> token source; None: plain decoding
        self.prefiller: Prefiller = prefiller or prefill
        # 0 < checkpoint <= len(prompt): ``on_checkpoint`` is called once that many tokens are read (the
        # state then ends where a question ends; engine.state.snapshot_cursor saves it), the prompt read in two
        # parts around it when it falls short of the end
        self.checkpoint = checkpoint if 0 < checkpoint <= len(prompt_tokens) else 0
        self.on_checkpoint = on_checkpoint or (lambda chunks: None)  # given the chunks read so far
        self.source = None
        self.session = session
        self.prompt_tokens = prompt_tokens
        self.settings = settings.validate()
        self.on_progress = on_progress or (lambda done, total: None)
        self.on_chunk_start = on_chunk_start
        self.cancelled = cancelled or (lambda: False)
        self.token_ids: list[int] = []
        self.pending_token: int | None = None  # the last sampled token, not yet decoded into the state
        self.prefill_chunks: list[int] | None = None  # how the prompt was fed (a snapshot replays the same)
        self.finish_reason: str | None = None
        self.cut_by = ""  # what ended a "length" answer: "max_tokens" or "context" (p.Finished.cut_by)
        self.timings = Timings(prompt_n=len(prompt_tokens))
        self.text = ""  # the answer, without its reasoning
        self.reasoning = ""
        self.tool_calls: list[p.ToolCall] = []  # the calls the answer made (engine.decoding.tool_use)
        self.tool_problem = ""  # why calls the model wrote were left as text

    def __iter__(self) -> Iterator[TextDelta]:
        start = time.perf_counter()
        settings = self.settings
        rng = make_rng(settings.sampling.seed)
        # The token source exists for the whole request, prefill included: an MTP head follows
        # every decode of the target, the prompt's too.
        self.source = self.make_source(self.session, settings.sampling, rng) if self.make_source else PlainSource(
            self.session, settings.sampling, rng)
        try:
            self.source.constraint = settings.constraint() if settings.constraint is not None else None
            if not self._prefill():
                self.finish_reason = "cancelled"
                self.timings.prompt_ms = _ms_since(start)
                return
            self.timings.prompt_ms = _ms_since(start)
            if not self.writes:
                self.finish_reason = "stop"
                return
            yield from self._decode(start)
        finally:
            self.source.finish()
            if self.source.constraint is not None:
                self.source.constraint.close()

    def _prefill(self) -> bool:
        """Read the prompt (in two parts around ``checkpoint``); False if cancelled, with
        ``timings.prompt_n`` the tokens read by then."""
        tokens, total = self.prompt_tokens, len(self.prompt_tokens)
        parts = [(0, self.checkpoint), (self.checkpoint, total)] if 0 < self.checkpoint < total else [(0, total)]
        read, chunks = [0], []
        for index, (begin, end) in enumerate(parts):
            def progress(done: int, _: int, begin: int = begin) -> None:
                read[0] = begin + done
                self.on_progress(begin + done, total)

            def chunk_start(done: int, length: int, _: int, begin: int = begin) -> None:
                if self.on_chunk_start is not None:
                    self.on_chunk_start(begin + done, length, total)

            ran = self.prefiller(self.session, tokens[begin:end], reset=self.reset and index == 0,
                                 on_progress=progress, cancelled=self.cancelled, on_chunk_start=chunk_start,
                                 logits_read=end == total)
            if ran is None:
                self.timings.prompt_n = read[0]
                return False
            chunks += ran
            if end == self.checkpoint:
                self.on_checkpoint(list(chunks))
        self.prefill_chunks = chunks
        return True

    def _decode(self, start: float) -> Iterator[TextDelta]:
        settings, source = self.settings, self.source
        out = _TextOut(self.session.model, settings.stop, settings.reasoning, settings.tools)
        decode_start = time.perf_counter()
        tokens, flags = [source.first()], [False]
        self.timings.ttft_ms = _ms_since(start)
        while True:
            used, finish = 0, None
            for token, from_draft in zip(tokens, flags):
                finish = self._take(token, from_draft, out)
                if out.ready():
                    yield out.take()
                if finish:
                    break
                used += 1
            kept = min(used, len(tokens) - 1)  # tokens that stay in the state; the next one is pending
            source.settle(kept)
            self.pending_token = tokens[kept]
            if finish is None and self.cancelled():
                finish = "cancelled"
            elif finish is None and self.session.n_past + 1 >= self.session.n_ctx:
                finish, self.cut_by = "length", "context"
            if finish:
                self.finish_reason = finish
                break
            tokens, flags = source.step(tokens[-1]), source.from_draft
        tail = out.finish()
        if tail is not None:
            yield tail
        self.text, self.reasoning = out.text, out.reasoning
        if out.calls is not None:
            self.tool_calls, self.tool_problem = out.calls.calls, out.calls.problem
        self.timings.gen_n = len(self.token_ids)
        self.timings.gen_ms = _ms_since(decode_start)

    def _take(self, token: int, from_draft: bool, out: "_TextOut") -> str | None:
        """Account for one generated token; returns a finish reason if it ends the answer."""
        if self.session.model.is_eog(token):
            return "stop"
        self.token_ids.append(token)
        out.add(token, from_draft)
        if out.stopped:
            return "stop"
        if len(self.token_ids) >= self.settings.max_tokens:
            self.cut_by = "max_tokens"
            return "length"
        return None


class _TextOut:
    """Turns tokens into text deltas: whole characters only, nothing of a stop string, reasoning
    apart from the answer, and which of the answer's characters came from accepted draft tokens."""

    def __init__(self, model, stop: tuple[str, ...], reasoning: ReasoningStart, tools: ToolUse | None = None) -> None:
        self.model = model
        self.shown = tools.shown if tools is not None else frozenset()  # control tokens written as text
        self.calls = CallSplitter(tools) if tools is not None and tools.reads_calls else None
        self.utf8, self.stops = Utf8Stream(), StopStringFilter(stop)
        self.splitter = ReasoningSplitter(reasoning)
        self.text = self.reasoning = ""
        self._ready = self._ready_reasoning = ""
        self._ids: list[int] = []
        self._n_from_draft = 0
        self._decoded_spans: list[list] = []  # [chars, from_draft] of text decoded but not yet released
        self._spans: list[list] = []  # of the answer text ready to send

    @property
    def stopped(self) -> bool:
        return self.stops.stopped

    def add(self, token: int, from_draft: bool) -> None:
        piece = self.model.token_text(token).encode() if token in self.shown else self.model.piece(token)
        decoded = self.utf8.feed(piece)
        self._ids.append(token)
        self._n_from_draft += from_draft
        add_span(self._decoded_spans, len(decoded), from_draft)
        self._route(self.stops.feed(decoded))

    def _route(self, released: str) -> None:
        """Sort text the stop filter released into reasoning and answer."""
        self._sort(*self.splitter.feed(released, _take_spans(self._decoded_spans, len(released))))

    def _sort(self, reasoning: str, answer: str, spans: list) -> None:
        if self.calls is not None:
            shown = self.calls.feed(answer)
            if shown != answer:  # part of it is held as a possible call: its draft spans are not told apart
                answer, spans = shown, [[len(shown), False]] if shown else []
        self._ready_reasoning += reasoning
        self._ready += answer
        for chars, drafted in spans:
            add_span(self._spans, chars, drafted)

    def ready(self) -> bool:
        return bool(self._ready or self._ready_reasoning)

    def take(self) -> TextDelta:
        text, self._ready = self._ready, ""
        reasoning, self._ready_reasoning = self._ready_reasoning, ""
        self.text += text
        self.reasoning += reasoning
        delta = TextDelta(text, tuple(self._ids), self._n_from_draft, _take_spans(self._spans, len(text)), reasoning)
        self._ids, self._n_from_draft = [], 0
        return delta

    def finish(self) -> TextDelta | None:
        if not self.stopped:
            tail = self.utf8.flush()
            add_span(self._decoded_spans, len(tail), False)
            self._route(self.stops.feed(tail))
            self._route(self.stops.flush())
        self._sort(*self.splitter.flush())
        if self.calls is not None:
            released = self.calls.finish()
            self._ready += released
            add_span(self._spans, len(released), False)
        if self._ready or self._ready_reasoning or self._ids:
            return self.take()
        return None


def _take_spans(spans: list[list], chars: int) -> tuple[tuple[int, bool], ...]:
    """The spans covering the first ``chars`` characters, taken off the front of ``spans``."""
    taken: list[tuple[int, bool]] = []
    while chars > 0 and spans:
        n, flag = spans[0]
        used = min(n, chars)
        taken.append((used, flag))
        chars -= used
        if used == n:
            spans.pop(0)
        else:
            spans[0][0] = n - used
    return tuple(taken)


def _prunable(done: int, length: int, total: int, followed: bool, logits_read: bool) -> bool:
    """Whether the chunk ``done..done+length`` of a ``total``-token read may be pruned: its rows
    past the last layer's attention, but its last, are read by nobody.

    A chunk before the last FULL_ROWS_TAIL rows always may. With no drafting head following
    (``followed``), every chunk may but the read's last when its logits are read (``logits_read``:
    they give the answer's first token): a pruned chunk computes that row's last layer alone, on
    other kernels than the batch's. Only where a read shorter than EXACT_ROWS rows takes the
    single-row kernels (a build without the switch, :mod:`engine.backends.row_kernels`) are they
    the same, row for row, so such a last chunk may be pruned. Pruning never changes the state, so
    a drafted and a plain answer still read the same prompt to the same logits."""
    if done + length <= total - FULL_ROWS_TAIL:
        return True
    exact = length < EXACT_ROWS and row_kernels.short_reads_exact()
    return not followed and (done + length < total or not logits_read or exact)


def prefill(session: ModelSession, tokens: list[int], *, reset: bool, on_progress: ProgressCallback,
            cancelled: CancelCheck, on_chunk_start: ChunkCallback | None = None,
            logits_read: bool = True) -> list[int] | None:
    """Read ``tokens`` in chunks of the batch size, reporting progress after each; the chunk
    lengths, or None if cancelled. ``logits_read``: the last token's logits will be read (False: more
    of the read follows, as after a question's part), which decides what may be pruned (:func:`_prunable`).

    Every chunk is one full batch (the last one the remainder): a ``llama_decode`` call costs a
    fixed overhead (and, with threads sharing busy cores, a wait at each of ggml's per-node
    barriers), so small chunks read far slower per token. Cancel needs no small chunks: it is
    polled inside each chunk too, through llama.cpp's abort callback, and an aborted chunk leaves
    nothing counted (:meth:`~engine.models.session.ModelSession.feed`). Progress between chunks is
    estimated by :mod:`engine.decoding.progress`. The chunking depends on the lengths alone, so reading
    the same tokens twice gives the same state; the lengths are recorded with a snapshot, whose
    replay feeds the same chunks.
    """
    if reset:
        session.reset()
    chunks: list[int] = []
    done = 0
    followed = session.rows_followed
    while done < len(tokens):
        if cancelled():
            return None
        chunk = tokens[done : done + session.n_batch]
        if on_chunk_start is not None:
            on_chunk_start(done, len(chunk), len(tokens))
        try:
            last = done + len(chunk) == len(tokens)
            session.feed(chunk, abort=cancelled, prune=_prunable(done, len(chunk), len(tokens), followed, logits_read),
                         logits=last and logits_read)
        except DecodeAborted:
            return None
        chunks.append(len(chunk))
        done += len(chunk)
        on_progress(done, len(tokens))
    return chunks
