"""A draft head's llama.cpp context: what the MTP head and the EAGLE-3 head run the same way.

Both heads (:mod:`engine.backends.llama_mtp`, :mod:`engine.backends.llama_eagle3`) are one-layer
models that guess the token after a token from a pair (that token, an embedding row from the
target). Each runs in a second llama.cpp context beside the target's:

* **Made next to the target.** ``ctx_other`` is the target context (an MTP head is part of it; an
  EAGLE-3 head borrows its embeddings and output through it). The head has one sequence and no
  recurrent state (``n_rs_seq`` 0), the target's context length, threads and flash-attention
  setting, and a batch of ``n_batch`` rows in one ubatch.
* **Rows.** A row carries a token id *and* an embedding row; llama.cpp copies both from a legacy
  ``llama_batch``. ``llama_batch_init`` with an embedding width allocates ``embd`` but no ``token``
  array, so :class:`RowBatch` attaches one of its own (and detaches it before freeing the batch).
* **Outputs.** Logits over the vocabulary, and the head's own output embedding at each output row
  (llama.cpp's "nextn" embeddings, masked to output rows): the embedding of the next chained guess.
* **Memory.** A plain KV cache for the head's one attention layer, truncated by position.

What differs stays in each head's module: the MTP context type and the target's hidden states; the
EAGLE-3 model file, its checks, its layer capture and its encoder (which uses a
:class:`RowBatch` without token ids).

Only this module and the other ``engine.backends.llama_*`` adapters import ``llama_cpp``.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel


def make_head_context(model: LlamaModel, target: LlamaContext, n_batch: int, *, ctx_type: int | None = None):
    """A llama.cpp context for the head ``model`` beside ``target`` (None if llama.cpp refuses)."""
    settings = target.settings
    params = llama_cpp.llama_context_default_params()
    if ctx_type is not None:
        params.ctx_type = ctx_type
    params.ctx_other = target.handle
    params.n_ctx = target.n_ctx
    params.n_batch = params.n_ubatch = n_batch  # an encoder takes a whole batch in one ubatch
    params.n_seq_max = 1
    params.n_rs_seq = 0
    params.n_threads = settings.n_threads
    params.n_threads_batch = settings.n_threads_batch or settings.n_threads
    params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn
                              else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    params.no_perf = True
    return llama_cpp.llama_init_from_model(model.handle, params) or None


class RowBatch:
    """A legacy ``llama_batch`` of up to ``n_batch`` embedding rows of ``width`` values for sequence 0,
    with token ids if asked, and numpy views of its arrays."""

    def __init__(self, n_batch: int, width: int, *, tokens: bool) -> None:
        self.n_batch = n_batch
        self.batch = llama_cpp.llama_batch_init(n_batch, width, 1)  # allocates embd, not token
        self._tokens = None
        if tokens:
            self._tokens = (llama_cpp.llama_token * n_batch)()
            self.batch.token = ctypes.cast(self._tokens, ctypes.POINTER(llama_cpp.llama_token))
            self.token = np.ctypeslib.as_array(self._tokens)
        self.embd = np.ctypeslib.as_array(self.batch.embd, shape=(n_batch, width))
        self.pos = np.ctypeslib.as_array(self.batch.pos, shape=(n_batch,))
        self.logits = np.ctypeslib.as_array(self.batch.logits, shape=(n_batch,))
        np.ctypeslib.as_array(self.batch.n_seq_id, shape=(n_batch,))[:] = 1
        for i in range(n_batch):
            self.batch.seq_id[i][0] = 0

    def chunks(self, n_rows: int):
        """``(begin, n)`` for each batch-sized piece of ``n_rows`` rows."""
        for begin in range(0, n_rows, self.n_batch):
            yield begin, min(self.n_batch, n_rows - begin)

    def free(self) -> None:
        if self._tokens is not None:
            self.batch.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours, not llama_batch_free's
        llama_cpp.llama_batch_free(self.batch)


class HeadContext:
    """A head's context: decode (token, embedding) rows, read logits and the head's next embedding,
    truncate its cache. ``name`` (e.g. "the MTP head") is what error messages call it; ``refused`` is
    the message when llama.cpp cannot make the context."""

    def __init__(self, model: LlamaModel, target: LlamaContext, n_batch: int, *, name: str, refused: str,
                 ctx_type: int | None = None) -> None:
        handle = make_head_context(model, target, n_batch, ctx_type=ctx_type)
        if handle is None:
            raise RuntimeError(refused)
        self.handle, self.model, self.name = handle, model, name
        self._target, self._threads = target, target.settings.n_threads
        self.n_batch, self.n_embd = n_batch, model.n_embd
        llama_cpp_ext.llama_set_embeddings_nextn(handle, True, True)  # masked: output rows only
        self.memory = llama_cpp.llama_get_memory(handle)
        self._rows = RowBatch(n_batch, self.n_embd, tokens=True)

    def decode(self, tokens: list[int] | np.ndarray, embd: np.ndarray, start_pos: int, *,
               all_logits: bool = False) -> None:
        """Rows ``(tokens[i], embd[i])`` at positions ``start_pos + i`` into the head's KV cache; logits
        for the last row (or every row); longer input is split into batches."""
        rows = self._rows
        self.follow_threads()
        for begin, n in rows.chunks(len(tokens)):
            rows.token[:n] = tokens[begin:begin + n]
            rows.embd[:n] = embd[begin:begin + n]
            rows.pos[:n] = np.arange(start_pos + begin, start_pos + begin + n, dtype=np.int32)
            rows.logits[:n] = 1 if all_logits else 0
            rows.logits[n - 1] = 1
            rows.batch.n_tokens = n
            status = llama_cpp.llama_decode(self.handle, rows.batch)
            if status != 0:
                raise RuntimeError(f"{self.name} failed to decode (llama_decode returned {status})")

    def follow_threads(self) -> None:
        """Use as many threads as the target's last decode did: when other programs keep a core
        busy, the target's thread budget gave it up, and a head spinning on it would stall."""
        threads = self._target.n_threads
        if threads != self._threads:
            llama_cpp.llama_set_n_threads(self.handle, threads, threads)
            self._threads = threads

    def logits(self, row: int = -1) -> np.ndarray:
        """The head's logits at an output row of the last decode (a view; over the target's vocabulary)."""
        pointer = llama_cpp.llama_get_logits_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,))

    def next_hidden(self, row: int = -1) -> np.ndarray:
        """The head's own output embedding at an output row: what the next chained guess pairs with (a copy)."""
        pointer = llama_cpp_ext.llama_get_embeddings_nextn_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.n_embd,)).copy()

    def pos_min(self) -> int:
        """The first position in the head's cache (-1 when empty)."""
        return int(llama_cpp.llama_memory_seq_pos_min(self.memory, 0))

    def pos_max(self) -> int:
        """The last position in the head's cache (-1 when empty)."""
        return int(llama_cpp.llama_memory_seq_pos_max(self.memory, 0))

    def truncate(self, position: int) -> None:
        """Forget the head's rows at ``position`` and after."""
        llama_cpp.llama_memory_seq_rm(self.memory, 0, position, -1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self.handle:
            self._rows.free()
            llama_cpp.llama_free(self.handle)
            self.handle = None
