"""A model's MTP (multi-token prediction, "nextn") head, driven through llama.cpp's MTP context.

Qwen3.5-style GGUFs carry one extra transformer block after the trunk. Given a token ``x_p`` and
the target's hidden state ``h_{p-1}`` (after its final norm) it predicts the token after ``x_p``,
and it exports its own hidden state so it can be chained for a second guess. llama.cpp runs it in
a second context of type ``LLAMA_CONTEXT_TYPE_MTP`` made from the same loaded model; its memory is
a plain KV cache for the head's one attention layer. Each batch row carries both a token id and an
embedding row; that context, its batches and its outputs are run as the EAGLE-3 head's are
(:class:`engine.backends.head_context.HeadContext`). The target context is asked to output its
hidden state for every row it decodes (``llama_set_embeddings_nextn``, unmasked).

Only this module and the other ``engine.backends.llama_*`` adapters (and
:mod:`engine.backends.head_context`) import ``llama_cpp``.
"""

from __future__ import annotations

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends.head_context import HeadContext
from engine.backends.llama_context import LlamaContext


def output_hidden_states(target: LlamaContext, on: bool) -> None:
    """Have the target output its hidden state for every row of each unpruned decode (or stop)."""
    target.output_hidden_rows(on)


def hidden_states(target: LlamaContext, n_rows: int) -> np.ndarray:
    """A copy of the hidden states of the target's last decode, one row per token."""
    pointer = llama_cpp_ext.llama_get_embeddings_nextn(target.handle)
    if not pointer:
        raise RuntimeError("the target did not output hidden states; call output_hidden_states first")
    return np.ctypeslib.as_array(pointer, shape=(n_rows, target.model.n_embd)).copy()


class MtpContext(HeadContext):
    """The MTP head's context: decode (token, hidden state) rows; read logits and its own hidden state
    (``next_hidden``)."""

    def __init__(self, target: LlamaContext, n_batch: int = 64) -> None:
        super().__init__(target.model, target, n_batch, name="the MTP head",
                         refused="llama.cpp could not create an MTP context for this model (it has no MTP layers, "
                                 "or they were not loaded)",
                         ctx_type=llama_cpp.LLAMA_CONTEXT_TYPE_MTP)
