"""An EAGLE-3 draft head driven through llama.cpp: the target's layer features in, guesses out.

An EAGLE-3 head (GGUF architecture ``eagle3``, llama.cpp ``src/models/eagle3.cpp``) is a
one-layer model that reads three of its target's hidden states. The flow for one target decode:

1. **Capture.** The target context is asked to keep the *input* of each of the head's three target
   layers (``llama_set_embeddings_layer_inp``) for every row it decodes; a layer id equal to the
   target's layer count means the trunk's output, which llama.cpp exposes as the "nextn"
   embeddings (after the final norm on qwen35), as ``common/speculative.cpp`` does.
2. **Features.** After the decode, the three ``[n_rows, n_embd_tgt]`` arrays are concatenated per
   row into ``[n_rows, 3 * n_embd_tgt]``.
3. **Encode (fc fusion).** The head's encoder graph maps each feature row to one ``g`` row
   (``[n_rows, n_embd]``), read from the head's nextn embeddings. It keeps no memory, so
   positions are placeholders.
4. **Decode.** A row ``(token, g)`` at position ``p`` runs the head's one decoder layer (with a KV
   cache of its own) and gives logits for the token after ``token``, plus the head's pre-norm
   output, which is the ``g`` of the next chained guess. In llama.cpp's convention the row at
   position ``p`` pairs ``g`` of target position ``p`` with the token at ``p + 1``.

The head's context is made with ``ctx_other`` = the target context: a head without its own token
embeddings or output matrix borrows the target's through it, so the head must share the target's
vocabulary and hidden size. Those, the declared ``eagle3.target_hidden_size`` and the layer ids are
checked before any context exists (:class:`Eagle3Incompatible`), because llama.cpp aborts the
process on a layer id it cannot capture instead of returning an error.

``llama_encode`` / ``llama_decode`` with a legacy ``llama_batch`` are used for the two graphs:
llama.cpp routes them to the same ``encode`` / ``decode`` as ``llama_process`` with
``LLAMA_PROCESS_TYPE_ENCODE`` / ``_DECODE`` (an encoder batch's rows are ``3 * n_embd_tgt`` wide),
and the batches stay ordinary ctypes structures. The context, the decoder's batch and the reading
of logits and ``g`` are the ones the MTP head uses too (:mod:`engine.backends.head_context`).

Only this module, :mod:`engine.backends.llama_cpp`, :mod:`engine.backends.llama_mtp` and
:mod:`engine.backends.head_context` import ``llama_cpp``. The five staging-header symbols
(``src/llama-ext.h``, C++ linkage) are looked up by their mangled names as
``llama_cpp.llama_cpp_ext`` does.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends.head_context import HeadContext, RowBatch
from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel, _meta_string

_ctx_p, _model_p = llama_cpp.llama_context_p_ctypes, llama_cpp.llama_model_p_ctypes
_bind = llama_cpp_ext._ctypes_function_from_names  # noqa: SLF001 - the ABI-aware lookup llama-cpp-python uses


@_bind(("llama_set_embeddings_layer_inp", "_Z30llama_set_embeddings_layer_inpP13llama_contextjb"),
       [_ctx_p, ctypes.c_uint32, ctypes.c_bool], None)
def llama_set_embeddings_layer_inp(ctx, lid: int, value: bool, /) -> None:
    """Keep (or stop keeping) the input of layer ``lid`` for every row of each decode."""


@_bind(("llama_get_embeddings_layer_inp", "_Z30llama_get_embeddings_layer_inpP13llama_contextj"),
       [_ctx_p, ctypes.c_uint32], ctypes.POINTER(ctypes.c_float))
def llama_get_embeddings_layer_inp(ctx, lid: int, /):
    """The kept input of layer ``lid`` from the last decode, ``[n_rows, n_embd]`` (aborts if not kept)."""


@_bind(("llama_model_target_layer_ids", "_Z28llama_model_target_layer_idsPK11llama_model"),
       [_model_p], ctypes.POINTER(ctypes.c_int32))
def llama_model_target_layer_ids(model, /):
    """The target layer ids an EAGLE-3 (or DFlash) model reads; NULL for other models."""


@_bind(("llama_model_target_layer_ids_n", "_Z30llama_model_target_layer_ids_nPK11llama_model"),
       [_model_p], ctypes.c_uint32)
def llama_model_target_layer_ids_n(model, /) -> int:
    """How many target layer ids the model declares (0 for other models)."""


llama_get_ctx_other = llama_cpp_ext.llama_get_ctx_other


class Eagle3Incompatible(ValueError):
    """The file is not an EAGLE-3 head for this target; the message says what differs."""


def target_layer_ids(model: LlamaModel) -> tuple[int, ...]:
    """The layer ids an ``eagle3`` model declares (``eagle3.target_layers``)."""
    n = int(llama_model_target_layer_ids_n(model.handle))
    ids = llama_model_target_layer_ids(model.handle)
    return tuple(int(ids[i]) for i in range(n)) if n and ids else ()


def check_head(head: LlamaModel, target: LlamaModel) -> tuple[int, int, int]:
    """The head's three layer ids, once it is known to fit ``target``; else :class:`Eagle3Incompatible`."""
    name = head.path.name
    arch = _meta_string(head.handle, "general.architecture")
    if arch != "eagle3":
        raise Eagle3Incompatible(f"{name} is not an EAGLE-3 head (its architecture is {arch!r}, not 'eagle3')")
    declared = _meta_string(head.handle, "eagle3.target_hidden_size")
    if declared is None or int(declared) != target.n_embd:
        raise Eagle3Incompatible(f"{name} was made for a target of hidden size {declared}, "
                                 f"but {target.path.name} has {target.n_embd}")
    if head.n_embd != target.n_embd:
        raise Eagle3Incompatible(f"{name} has hidden size {head.n_embd}; it borrows the embeddings of "
                                 f"{target.path.name}, whose hidden size is {target.n_embd}")
    if head.n_vocab != target.n_vocab:
        raise Eagle3Incompatible(f"{name} has a vocabulary of {head.n_vocab} tokens, "
                                 f"{target.path.name} one of {target.n_vocab}")
    ids = target_layer_ids(head)
    n_layer = int(llama_cpp.llama_model_n_layer(target.handle))
    if len(ids) != 3 or not all(0 <= i <= n_layer for i in ids):
        raise Eagle3Incompatible(f"{name} reads layers {list(ids)} of its target; {target.path.name} "
                                 f"has layers 0..{n_layer - 1} (and {n_layer} for its output)")
    return ids  # type: ignore[return-value]


class TargetFeatures:
    """The target's side: keep the three layers' inputs at each decode, and read them concatenated."""

    def __init__(self, target: LlamaContext, layer_ids: tuple[int, ...]) -> None:
        self.target, self.layer_ids = target, layer_ids
        self.n_layer = int(llama_cpp.llama_model_n_layer(target.model.handle))
        self.n_embd = target.model.n_embd
        self.capturing = False

    def capture(self, on: bool) -> None:
        """Switch capture on or off (it costs one copy per layer and row of each target decode)."""
        for lid in self.layer_ids:
            if lid < self.n_layer:
                llama_set_embeddings_layer_inp(self.target.handle, lid, on)
            else:  # the trunk's output
                llama_cpp_ext.llama_set_embeddings_nextn(self.target.handle, on, False)
        self.capturing = on

    def read(self, n_rows: int) -> np.ndarray:
        """A copy of the last decode's features, ``[n_rows, 3 * n_embd]`` (layers in declared order)."""
        if not self.capturing:
            raise RuntimeError("the target is not capturing features; call capture(True) before decoding")
        out = np.empty((n_rows, len(self.layer_ids) * self.n_embd), dtype=np.float32)
        for k, lid in enumerate(self.layer_ids):
            pointer = (llama_get_embeddings_layer_inp(self.target.handle, lid) if lid < self.n_layer
                       else llama_cpp_ext.llama_get_embeddings_nextn(self.target.handle))
            rows = np.ctypeslib.as_array(pointer, shape=(n_rows, self.n_embd))
            out[:, k * self.n_embd:(k + 1) * self.n_embd] = rows
        return out


class Eagle3Head(HeadContext):
    """An EAGLE-3 head loaded for ``target``: encode features into ``g``, decode ``(token, g)`` rows.

    Decoding, logits, the next ``g`` (``next_hidden``, also called ``next_g``) and the cache are the
    :class:`~engine.backends.head_context.HeadContext` a head shares with the MTP head; this class adds
    the head's own model file, its checks, the target's layer capture and the encoder."""

    def __init__(self, path: Path, target: LlamaContext, n_batch: int = 64) -> None:
        model = LlamaModel(Path(path))
        try:
            self.layer_ids = check_head(model, target.model)
            super().__init__(model, target, n_batch, name="the EAGLE-3 head",
                             refused=f"llama.cpp could not create a context for the EAGLE-3 head {model.path.name}")
        except Exception:
            model.close()
            raise
        self.target = target
        self.features = TargetFeatures(target, self.layer_ids)
        self.n_fused = len(self.layer_ids) * target.model.n_embd
        self._enc = RowBatch(n_batch, self.n_fused, tokens=False)
        self._enc.logits[:] = 1

    next_g = HeadContext.next_hidden  # the g of the next chained guess

    def encode(self, features: np.ndarray) -> np.ndarray:
        """``g`` for each feature row: ``[n, 3 * n_embd_tgt]`` in, ``[n, n_embd]`` out (a copy)."""
        out = np.empty((len(features), self.n_embd), dtype=np.float32)
        enc = self._enc
        after = self.pos_max() + 1  # unused by the encoder graph, but llama.cpp wants them to follow the cache
        self.follow_threads()
        for begin, n in enc.chunks(len(features)):
            enc.embd[:n] = features[begin:begin + n]
            enc.pos[:n] = np.arange(after, after + n, dtype=np.int32)
            enc.batch.n_tokens = n
            status = llama_cpp.llama_encode(self.handle, enc.batch)
            if status != 0:
                raise RuntimeError(f"the EAGLE-3 head failed to encode (llama_encode returned {status})")
            g = llama_cpp_ext.llama_get_embeddings_nextn(self.handle)
            out[begin:begin + n] = np.ctypeslib.as_array(g, shape=(n, self.n_embd))
        return out

    def close(self) -> None:
        if self.handle:
            if self.features.capturing and self.target.handle:
                self.features.capture(False)
            self._enc.free()
            super().close()
            self.model.close()
