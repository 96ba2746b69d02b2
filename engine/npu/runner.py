"""The NPU prefill of a live llama.cpp sequence: read the new tokens on the HTP, hand the state over.

:meth:`NpuPrefiller.prefill` has the shape of :func:`engine.decoding.generation.prefill`, so a generation
does not know which device read its input. The steps:

1. **Start state.** An empty sequence starts from zeros; otherwise llama.cpp's sequence blob is
   read into the graph's layout (:func:`~engine.npu.handoff.state_from_blob`), so an earlier turn
   or a restored snapshot continues on the NPU.
2. **Read** all new tokens but the last, one graph chunk at a time, reporting progress after each
   chunk and checking for cancel before each. The state lives on the host until the end, so a
   cancel or a failure leaves the llama.cpp sequence exactly as it was before the call (reset, if
   a reset was asked for): nothing needs undoing.
3. **Hand off.** The state becomes a sequence blob (:func:`~engine.npu.handoff.state_to_blob`)
   loaded with ``state_set``; the session's token list is updated in place to match.
4. **The last token is decoded on the CPU.** That gives the decoder llama.cpp's own logits
   (``state_set`` restores no logits) and the hidden state an MTP drafter follows, so every token
   source works unchanged; it costs one decode step, which the CPU does anyway. The graph's own
   logits are therefore not used here (the tests and the benchmark compare them).

Failures of the graph or of the hand-off raise :class:`NpuPrefillFailed` with the sequence
untouched, and the caller re-reads on the CPU (:mod:`engine.npu.service`).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.npu.handoff import kv_layout, state_from_blob, state_to_blob
from engine.npu.prefill import PrefillState, Runner, prefill_steps
from engine.npu.graph_shape import PrefillSpec
from engine.models.session import ModelSession
from engine.state.seq_state import StateFormatError

ProgressCallback = Callable[[int, int], None]
ChunkCallback = Callable[[int, int, int], None]


class NpuPrefillFailed(Exception):
    """The NPU could not read this input; the llama.cpp sequence is as it was. The message says why."""


class NpuPrefiller:
    """Reads inputs with one compiled prefill graph (``run``) for one loaded model."""

    def __init__(self, spec: PrefillSpec, run: Runner) -> None:
        self.spec = spec
        self.run = run
        self.layout = kv_layout(spec.config)  # Hearth's contexts: f16 K/V, flash attention, one stream

    def prefill(self, session: ModelSession, tokens: list[int], *, reset: bool, on_progress: ProgressCallback,
                cancelled: Callable[[], bool], on_chunk_start: ChunkCallback | None = None) -> list[int] | None:
        """Read ``tokens`` after the sequence's state; the chunk lengths, or None if cancelled."""
        if len(tokens) < 2:
            raise NpuPrefillFailed("the NPU reads inputs of two tokens or more")
        if reset:
            session.reset()
        state, before = self._start_state(session)
        chunks = self._read(tokens[:-1], state, len(tokens), on_progress, cancelled, on_chunk_start)
        if chunks is None:
            return None
        self._hand_off(session, state, before)
        if on_chunk_start is not None:
            on_chunk_start(len(tokens) - 1, 1, len(tokens))
        session.feed(tokens[-1:])
        on_progress(len(tokens), len(tokens))
        return chunks + [1]

    def _start_state(self, session: ModelSession) -> tuple[PrefillState, bytes | None]:
        """The graph state equal to the sequence's, and the sequence blob it came from (None: empty)."""
        if session.n_past == 0:
            return PrefillState.empty(self.spec), None
        before = session.context.state_get(0)
        try:
            state = state_from_blob(self.spec.config, before, self.spec.max_ctx)
        except (StateFormatError, ValueError) as exc:
            raise NpuPrefillFailed(f"the sequence's state could not be read into the NPU graph ({exc})") from exc
        if state.n_past != session.n_past:
            raise NpuPrefillFailed(f"the sequence's state holds {state.n_past} tokens, the session {session.n_past}")
        state.tokens = list(session.tokens)
        return state, before

    def _read(self, tokens: list[int], state: PrefillState, total: int, on_progress: ProgressCallback,
              cancelled: Callable[[], bool], on_chunk_start: ChunkCallback | None) -> list[int] | None:
        chunks, done = [], 0
        steps = prefill_steps(self.run, self.spec, tokens, state)
        while done < len(tokens):
            if cancelled():
                return None
            if on_chunk_start is not None:
                on_chunk_start(done, min(self.spec.chunk, len(tokens) - done), total)
            try:
                read, _ = next(steps)
            except Exception as exc:  # onnxruntime/QNN errors have their own types; any of them ends the NPU try
                raise NpuPrefillFailed(f"the NPU graph failed on a chunk ({exc})") from exc
            chunks.append(read - done)
            done = read
            on_progress(done, total)
        return chunks

    def _hand_off(self, session: ModelSession, state: PrefillState, before: bytes | None) -> None:
        """Load ``state`` into the sequence, or leave the sequence as ``before`` and raise."""
        try:
            blob = state_to_blob(self.spec.config, state, self.layout)
        except StateFormatError as exc:
            raise NpuPrefillFailed(f"the NPU's state could not be written for llama.cpp ({exc})") from exc
        if not session.context.state_set(blob):
            self._restore(session, before)
            raise NpuPrefillFailed("llama.cpp refused the NPU's state")
        session.tokens[:] = state.tokens

    @staticmethod
    def _restore(session: ModelSession, before: bytes | None) -> None:
        if before is None:
            session.reset()
        elif not session.context.state_set(before):
            session.reset()
            raise RuntimeError("the sequence's state could not be put back after a failed NPU hand-off; "
                               "the conversation will be read again")
