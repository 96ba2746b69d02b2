"""A model's MTP (multi-token prediction, "nextn") head, driven through llama.cpp's MTP context.

Qwen3.5-style GGUFs carry one extra transformer block after the trunk. Given a token ``x_p`` and
the target's hidden state ``h_{p-1}`` (after its final norm) it predicts the token after ``x_p``,
and it exports its own hidden state so it can be chained for a second guess. llama.cpp runs it in
a second context of type ``LLAMA_CONTEXT_TYPE_MTP`` made from the same loaded model; its memory is
a plain KV cache for the head's one attention layer. Each batch row carries both a token id and an
embedding row (llama.cpp copies both from a legacy ``llama_batch``). The target context is asked
to output its hidden state for every row it decodes (``llama_set_embeddings_nextn``, unmasked).

Only this module and :mod:`engine.backends.llama_cpp` import ``llama_cpp``.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends.llama_cpp import LlamaContext


def output_hidden_states(target: LlamaContext, on: bool) -> None:
    """Have the target output its hidden state for every row of each decode (or stop)."""
    llama_cpp_ext.llama_set_embeddings_nextn(target.handle, on, False)


def hidden_states(target: LlamaContext, n_rows: int) -> np.ndarray:
    """A copy of the hidden states of the target's last decode, one row per token."""
    pointer = llama_cpp_ext.llama_get_embeddings_nextn(target.handle)
    if not pointer:
        raise RuntimeError("the target did not output hidden states; call output_hidden_states first")
    return np.ctypeslib.as_array(pointer, shape=(n_rows, target.model.n_embd)).copy()


class MtpContext:
    """The MTP head's context: decode (token, hidden state) rows; read logits and its own hidden state."""

    def __init__(self, target: LlamaContext, n_batch: int = 64) -> None:
        model, settings = target.model, target.settings
        params = llama_cpp.llama_context_default_params()
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target.handle
        params.n_ctx = target.n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = 1
        params.n_rs_seq = 0
        params.n_threads = settings.n_threads
        params.n_threads_batch = settings.n_threads_batch or settings.n_threads
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.no_perf = True
        handle = llama_cpp.llama_init_from_model(model.handle, params)
        if not handle:
            raise RuntimeError("llama.cpp could not create an MTP context for this model (it has no MTP layers, "
                               "or they were not loaded)")
        self.handle, self.model, self.n_batch = handle, model, n_batch
        self.n_embd = model.n_embd
        llama_cpp_ext.llama_set_embeddings_nextn(handle, True, True)  # masked: only output rows
        self.memory = llama_cpp.llama_get_memory(handle)
        self._batch = llama_cpp.llama_batch_init(n_batch, self.n_embd, 1)  # allocates embd, not token
        self._tokens = (llama_cpp.llama_token * n_batch)()
        self._batch.token = ctypes.cast(self._tokens, ctypes.POINTER(llama_cpp.llama_token))
        self._token = np.ctypeslib.as_array(self._tokens)
        self._embd = np.ctypeslib.as_array(self._batch.embd, shape=(n_batch, self.n_embd))
        self._pos = np.ctypeslib.as_array(self._batch.pos, shape=(n_batch,))
        self._logits = np.ctypeslib.as_array(self._batch.logits, shape=(n_batch,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(n_batch,))[:] = 1
        for i in range(n_batch):
            self._batch.seq_id[i][0] = 0

    def decode(self, tokens: list[int] | np.ndarray, hidden: np.ndarray, start_pos: int, *,
               all_logits: bool = False) -> None:
        """Rows ``(tokens[i], hidden[i])`` at positions ``start_pos + i``; longer input is split."""
        for begin in range(0, len(tokens), self.n_batch):
            n = min(self.n_batch, len(tokens) - begin)
            self._token[:n] = tokens[begin:begin + n]
            self._embd[:n] = hidden[begin:begin + n]
            self._pos[:n] = np.arange(start_pos + begin, start_pos + begin + n, dtype=np.int32)
            self._logits[:n] = 1 if all_logits else 0
            self._logits[n - 1] = 1
            self._batch.n_tokens = n
            status = llama_cpp.llama_decode(self.handle, self._batch)
            if status != 0:
                raise RuntimeError(f"the MTP head failed to decode (llama_decode returned {status})")

    def logits(self, row: int = -1) -> np.ndarray:
        pointer = llama_cpp.llama_get_logits_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,))

    def hidden(self, row: int = -1) -> np.ndarray:
        """The head's own hidden state at an output row (feeds the next chained guess)."""
        pointer = llama_cpp_ext.llama_get_embeddings_nextn_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.n_embd,)).copy()

    def truncate(self, position: int) -> None:
        """Forget the rows at ``position`` and after."""
        llama_cpp.llama_memory_seq_rm(self.memory, 0, position, -1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self.handle:
            self._batch.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours, not llama_batch_free's
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.handle)
            self.handle = None
