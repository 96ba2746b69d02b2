"""One llama.cpp inference context over a loaded model (:class:`LlamaContext`): batched decode
with numpy views over the batch, logits, the sequence and state calls that drafting and snapshots
need, the thread count, which rows a decode carries to the end, and cancel inside a decode through
llama.cpp's abort callback. The model, the backend's set-up and the quantizer are
:mod:`engine.backends.llama_cpp`'s.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends import cpu_check, row_kernels
from engine.backends.base import ContextSettings, ModelLoadError
from engine.backends.faults import crash_if_injected
from engine.backends.llama_cpp import LlamaModel, decode_fault_armed

log = logging.getLogger(__name__)

STATE_PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent part only, no attention KV


class DecodeAborted(Exception):
    """A decode stopped by its abort check (llama_decode returned 2) before it finished.

    What the context's memory holds afterwards is the caller's to put right: llama.cpp drops the
    attention KV of the unfinished micro-batch, but micro-batches finished before it stay, and a
    recurrent state may be half-updated (some layers written, others not). See
    :meth:`engine.models.session.ModelSession.feed`.
    """

    def __init__(self) -> None:
        super().__init__("decoding was aborted")




@dataclass
class _BatchViews:
    """numpy views over a llama_batch's arrays, so filling a batch costs no Python loop."""

    token: np.ndarray
    pos: np.ndarray
    logits: np.ndarray


# ContextSettings.kv_type; f32 only for reference contexts in tests (exact against other runtimes)
KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "f32": llama_cpp.GGML_TYPE_F32}


class LlamaContext:
    """One inference context: decode batches for sequence 0..n_seq_max-1, read logits and state."""

    def __init__(self, model: LlamaModel, settings: ContextSettings) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = settings.n_ctx
        params.n_batch = settings.n_batch
        params.n_ubatch = settings.n_ubatch
        params.n_seq_max = settings.n_seq_max
        params.n_rs_seq = settings.n_rs_seq
        params.kv_unified = settings.kv_unified
        params.n_threads = settings.n_threads
        params.n_threads_batch = settings.n_threads_batch or settings.n_threads
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.type_k = params.type_v = KV_TYPES[settings.kv_type]
        params.no_perf = True
        handle = llama_cpp.llama_init_from_model(model.handle, params)
        if not handle:
            raise ModelLoadError(model.path, f"llama.cpp could not create a context of {settings.n_ctx} tokens "
                                 "(not enough memory? try a shorter context)")
        self.model = model
        # llama.cpp makes the batches no longer than a short context (n_batch = min(n_ctx, n_batch)):
        # the settings say what it made, so no decode is ever longer than it accepts.
        self.settings = settings = replace(settings, n_batch=int(llama_cpp.llama_n_batch(handle)),
                                           n_ubatch=int(llama_cpp.llama_n_ubatch(handle)))
        self.handle = handle
        self.memory = llama_cpp.llama_get_memory(handle)
        self.n_ctx = int(llama_cpp.llama_n_ctx(handle))
        self.n_rs_seq = int(llama_cpp.llama_n_rs_seq(handle))
        self._batch = llama_cpp.llama_batch_init(settings.n_batch, 0, settings.n_seq_max)
        self._views = _BatchViews(
            token=np.ctypeslib.as_array(self._batch.token, shape=(settings.n_batch,)),
            pos=np.ctypeslib.as_array(self._batch.pos, shape=(settings.n_batch,)),
            logits=np.ctypeslib.as_array(self._batch.logits, shape=(settings.n_batch,)),
        )
        self._batch_seq, self._batch_seq_rows = 0, 0
        self._n_seq_id = np.ctypeslib.as_array(self._batch.n_seq_id, shape=(settings.n_batch,))
        self._n_seq_id[:] = 1
        # Called after every successful decode with (tokens, start position, sequence): an MTP head
        # follows the target this way, reading the hidden states of exactly what was decoded.
        self.after_decode: Callable[[list[int] | np.ndarray, int, int], None] | None = None
        self._abort = _AbortCheck(handle)
        self._warming = False  # inside warm_up (the test-only decode fault waits for a request's decode)
        # Sequences rolled back through the recurrent planes and not decoded since: llama.cpp applies
        # the rollback at that sequence's next decode, and only for that sequence (not for copies).
        self.rollback_pending: set[int] = set()
        self.n_threads = settings.n_threads  # what the next decode uses
        self.hidden_rows = False  # output every row's final hidden state (an MTP head follows)
        self.pruned = False  # the last decode computed past the last layer's attention only its output rows
        self.has_logits = False  # the last decode kept an output row (see decode's ``logits``)
        self._outputs = (False, False)  # (hidden_rows, pruned) as llama.cpp was last told
        # Asked before every decode for the threads to use (engine.decoding.thread_budget.ThreadBudget); None: the settings'.
        self.thread_budget: Callable[[], int] | None = None

    def close(self) -> None:
        if self.handle:
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.handle)
            self.handle = None

    def _set_batch_seq(self, seq_id: int, n: int) -> None:
        """Rows 0..n-1 of the batch belong to ``seq_id`` (rows are only rewritten when that changes)."""
        if seq_id != self._batch_seq:
            self._batch_seq, self._batch_seq_rows = seq_id, 0
        for i in range(self._batch_seq_rows, n):
            self._batch.seq_id[i][0] = seq_id
        self._batch_seq_rows = max(self._batch_seq_rows, n)

    def decode(self, tokens: list[int] | np.ndarray, start_pos: int, *, all_logits: bool = False, seq_id: int = 0,
               abort: Callable[[], bool] | None = None, prune: bool = False, logits: bool = True,
               prompt: bool = False) -> None:
        """Decode ``tokens`` at positions ``start_pos..``; logits for the last row, or every row.

        ``abort`` is polled while the batch is computed (between graph nodes, many times a
        second); when it returns true the decode stops and raises :class:`DecodeAborted`.
        ``prune``: the caller needs this batch's state and output rows only, so the model's last
        layer computes past its attention only the output rows (see :meth:`_set_outputs`).
        ``logits=False`` (with ``prune``, no row's hidden state asked for): not even the last row is
        an output, as llama-server reads a prompt's inner chunks; the batch only moves the state
        (the output layer of a 248k-token vocabulary is 13 ms of the Qwen3.5-0.8B shape's decode).
        ``prompt``: a prompt read, which may take the batched kernels however short it is; any other
        batch of fewer than EXACT_ROWS rows gives each row what decoding it alone gives
        (:mod:`engine.backends.row_kernels`).
        """
        n = len(tokens)
        if not 0 < n <= self.settings.n_batch:
            raise ValueError(f"a batch holds 1..{self.settings.n_batch} tokens, got {n}")
        self._set_batch_seq(seq_id, n)
        views = self._views
        views.token[:n] = tokens
        views.pos[:n] = np.arange(start_pos, start_pos + n, dtype=np.int32)
        views.logits[:n] = 1 if all_logits else 0
        self.has_logits = all_logits or logits or not prune or self.hidden_rows
        views.logits[n - 1] = 1 if self.has_logits else 0
        self._batch.n_tokens = n
        if decode_fault_armed() and not self._warming:  # the warm-up is the load's (its stage is "load")
            crash_if_injected("decode", cpu_check.active().variant)
        if self.thread_budget is not None:
            self.use_threads(self.thread_budget())
        self._set_outputs(prune)
        with row_kernels.fast_kernels() if prompt else nullcontext():
            if abort is None:
                status = llama_cpp.llama_decode(self.handle, self._batch)
            else:
                with self._abort.polling(abort, n):
                    status = llama_cpp.llama_decode(self.handle, self._batch)
        if status == 2 and abort is not None:
            raise DecodeAborted()
        if status != 0:
            raise RuntimeError(_decode_failure(status, start_pos + n, self.n_ctx))
        self.rollback_pending.discard(seq_id)
        if self.after_decode is not None:
            self.after_decode(tokens, start_pos, seq_id)

    def warm_up(self, tokens: list[int]) -> None:
        """Decode ``tokens`` once and forget them, as llama.cpp's own tools do after a load: the
        weights are paged in from the file and the graph is set up now, not at the first question,
        and the graph's node count (:meth:`decode_progress`) is known before the first prompt."""
        follower, self.after_decode, self._warming = self.after_decode, None, True
        try:
            self.decode(tokens, 0, abort=lambda: False)
        finally:
            self.after_decode, self._warming = follower, False
            self.clear()

    def decode_progress(self) -> float | None:
        """How far the running abortable decode is (0..1), or None (see ``_AbortCheck.progress``)."""
        return self._abort.progress()

    def decode_rows(self, tokens: list[int], positions: list[int], seq_ids: list[int]) -> None:
        """Decode one batch whose rows belong to several sequences, with logits at every row (a
        tree of drafts verified at once: one sequence per path). ``after_decode`` is not called:
        only sequence 0's decodes are followed."""
        n = len(tokens)
        if not 0 < n <= self.settings.n_batch or not len(positions) == len(seq_ids) == n:
            raise ValueError(f"a batch holds 1..{self.settings.n_batch} rows, each with a position and a sequence")
        for i, seq_id in enumerate(seq_ids):
            self._batch.seq_id[i][0] = seq_id
        self._batch_seq, self._batch_seq_rows = -1, 0  # the next single-sequence decode rewrites the rows
        views = self._views
        views.token[:n] = tokens
        views.pos[:n] = positions
        views.logits[:n] = 1
        self._batch.n_tokens = n
        if self.thread_budget is not None:
            self.use_threads(self.thread_budget())
        self._set_outputs(False)
        status = llama_cpp.llama_decode(self.handle, self._batch)
        if status != 0:
            raise RuntimeError(_decode_failure(status, max(positions) + 1, self.n_ctx))
        self.rollback_pending.difference_update(seq_ids)

    def output_hidden_rows(self, on: bool) -> None:
        """Have each unpruned decode output every row's final hidden state (or stop)."""
        self.hidden_rows = on
        self._set_outputs(self.pruned)

    def _set_outputs(self, prune: bool) -> None:
        """Tell llama.cpp which rows the next decode carries to the end.

        Qwen3.5's graph in this llama.cpp (and Nemotron-H's) drops the rows no output needs at the
        last layer only when told to ("masked"); otherwise that layer's FFN runs for every row of a
        prompt chunk, whose logits but the last are never read. A pruned decode leaves the state
        (every layer's KV and recurrent state) as an unpruned one does; only the output rows'
        numbers may take other kernels (the same ones below EXACT_ROWS rows only where short reads stay
        exact: engine.backends.row_kernels), so a read prunes only
        chunks whose outputs nobody reads or would read the same (engine.decoding.generation._prunable).
        Other architectures always drop them."""
        wanted = (self.hidden_rows, prune)
        if wanted != self._outputs:
            llama_cpp_ext.llama_set_embeddings_nextn(self.handle, *wanted)
            self._outputs = wanted
        self.pruned = prune

    def use_threads(self, n: int) -> None:
        """Decode with ``n`` threads from now on (the results do not depend on it, only the speed)."""
        if n != self.n_threads:
            llama_cpp.llama_set_n_threads(self.handle, n, n)
            self.n_threads = n

    def logits(self, row: int = -1) -> np.ndarray:
        """Logits of an output row of the last decode (a view: copy it to keep it past the next decode)."""
        if not self.has_logits:
            raise RuntimeError("the last decode kept no logits (a prompt chunk read for its state only)")
        pointer = llama_cpp.llama_get_logits_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,))

    # -- memory and sequence state ---------------------------------------------------------------

    def clear(self) -> None:
        """Forget every sequence. The buffers are not zeroed (``data=False``): a cell nobody holds is
        masked out of attention, as after any ``seq_rm``, and llama.cpp zeroes a recurrent state in
        the graph when a sequence takes a fresh cell. Zeroing cost a memset of the whole KV cache
        before every new prompt (7 ms at SmolLM2's 8,192 tokens; the cache grows with the context)."""
        llama_cpp.llama_memory_clear(self.memory, False)
        self.rollback_pending.clear()

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        removed = bool(llama_cpp.llama_memory_seq_rm(self.memory, seq_id, p0, p1))
        if p0 <= 0 and p1 < 0:
            self.rollback_pending.discard(seq_id)
        elif removed and self.n_rs_seq:
            self.rollback_pending.add(seq_id)
        return removed

    def rewind(self, seq_id: int, n_tokens: int, recurrent_blob: bytes | None) -> bool:
        """Make ``seq_id`` hold its first ``n_tokens`` again, as llama-server restores a context
        checkpoint: the recurrent part set from ``recurrent_blob`` (taken at that point with
        :data:`STATE_PARTIAL_ONLY`; None for a model without one), then the attention KV after them
        removed (the recurrent cell already stands there, so nothing is rolled back)."""
        if recurrent_blob is not None and not self.state_set(recurrent_blob, seq_id, STATE_PARTIAL_ONLY):
            return False
        removed = bool(llama_cpp.llama_memory_seq_rm(self.memory, seq_id, n_tokens, -1))
        self.rollback_pending.discard(seq_id)
        return removed

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Make sequence ``dst`` a copy of ``src`` (recurrent cells are copied on the next decode,
        from the live plane: a rollback pending on ``src`` is not seen by ``dst``)."""
        llama_cpp.llama_memory_seq_cp(self.memory, src, dst, p0, p1)

    def seq_pos_max(self, seq_id: int = 0) -> int:
        return int(llama_cpp.llama_memory_seq_pos_max(self.memory, seq_id))

    def state_size(self, seq_id: int = 0, flags: int = 0) -> int:
        return int(llama_cpp.llama_state_seq_get_size_ext(self.handle, seq_id, flags))

    def state_get(self, seq_id: int = 0, flags: int = 0) -> bytes:
        size = self.state_size(seq_id, flags)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data_ext(self.handle, buf, size, seq_id, flags)
        return bytes(memoryview(buf)[:written])

    def state_set(self, blob: bytes | bytearray | np.ndarray, seq_id: int = 0, flags: int = 0) -> bool:
        """Load a sequence state; it is read in place (bytes through a pointer to their buffer, which
        llama.cpp only reads: no 20 MB copy of a Qwen3.5-0.8B state on the way to a rewind)."""
        size = len(blob)
        if isinstance(blob, bytes):
            buf = ctypes.cast(ctypes.c_char_p(blob), ctypes.POINTER(ctypes.c_uint8))
        else:
            buf = (ctypes.c_uint8 * size).from_buffer(blob)
        loaded = llama_cpp.llama_state_seq_set_data_ext(self.handle, buf, size, seq_id, flags) > 0
        self.rollback_pending.discard(seq_id)
        return loaded


class _AbortCheck:
    """llama.cpp's abort callback for one context, installed only while an abortable decode runs.

    ggml calls it from the decoding thread after every graph node; each call takes the GIL, so it
    is not left installed for the one-token decodes of generation, which stop between steps anyway.
    The ctypes callback object lives as long as this object (llama.cpp keeps only its address).
    """

    def __init__(self, handle: llama_cpp.llama_context_p) -> None:
        self._handle = handle
        self._check: Callable[[], bool] | None = None
        self._callback = llama_cpp.ggml_abort_callback(self._poll)
        self._none = llama_cpp.ggml_abort_callback()  # a null function pointer: no callback
        # Graph nodes computed so far in the running decode (one poll per node), and per batch
        # length how many a whole decode computed: together, how far into a batch the model is.
        self.polls = 0
        self.running: int | None = None  # the running decode's batch length
        self.nodes: dict[int, int] = {}
        self._stopped = False

    def progress(self) -> float | None:
        """How much of the running abortable decode is computed (0..1, by graph nodes), from the node
        count of an earlier decode of the same length or, failing that, of the last one; None when no
        abortable decode runs or none has finished yet."""
        length = self.running
        if length is None:
            return None
        nodes = self.nodes.get(length) or self.nodes.get(-1)
        return min(1.0, self.polls / nodes) if nodes else None

    def _poll(self, _data: ctypes.c_void_p) -> bool:
        self.polls += 1
        try:
            stop = bool(self._check is not None and self._check())
        except Exception:  # an exception cannot cross into C: stop the decode, say why in the log
            log.exception("the abort check of a decode failed; the decode is aborted")
            stop = True
        self._stopped = self._stopped or stop
        return stop

    @contextmanager
    def polling(self, check: Callable[[], bool], length: int) -> Iterator[None]:
        """Install ``check`` for a decode of ``length`` rows; its node count is kept if it finishes."""
        self._check, self.polls, self.running, self._stopped = check, 0, length, False
        llama_cpp.llama_set_abort_callback(self._handle, self._callback, None)
        try:
            yield
            if not self._stopped and self.polls:
                self.nodes[length] = self.nodes[-1] = self.polls
        finally:
            llama_cpp.llama_set_abort_callback(self._handle, self._none, None)
            self._check, self.running = None, None


def _decode_failure(status: int, end_pos: int, n_ctx: int) -> str:
    if status == 1:
        return f"the context is full ({end_pos} of {n_ctx} tokens); start a new conversation or use a longer context"
    if status == 2:
        return "decoding was aborted"
    return f"llama.cpp failed to decode (status {status})"
