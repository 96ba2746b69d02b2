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
and the batches stay ordinary ctypes structures.

Only this module, :mod:`engine.backends.llama_cpp` and :mod:`engine.backends.llama_mtp` import
``llama_cpp``. The five staging-header symbols (``src/llama-ext.h``, C++ linkage) are looked up by
their mangled names as ``llama_cpp.llama_cpp_ext`` does.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from engine.backends.llama_cpp import LlamaContext, LlamaModel, _meta_string

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


class Eagle3Head:
    """An EAGLE-3 head loaded for ``target``: encode features into ``g``, decode ``(token, g)`` rows."""

    def __init__(self, path: Path, target: LlamaContext, n_batch: int = 64) -> None:
        self.model = LlamaModel(Path(path))
        try:
            self.layer_ids = check_head(self.model, target.model)
            self.handle = self._make_context(target, n_batch)
        except Exception:
            self.model.close()
            raise
        self.target, self.n_batch, self.n_embd = target, n_batch, self.model.n_embd
        self.features = TargetFeatures(target, self.layer_ids)
        self.n_fused = len(self.layer_ids) * target.model.n_embd
        self.memory = llama_cpp.llama_get_memory(self.handle)
        llama_cpp_ext.llama_set_embeddings_nextn(self.handle, True, True)  # g / pre-norm rows of outputs only
        self._enc = llama_cpp.llama_batch_init(n_batch, self.n_fused, 1)
        self._dec = llama_cpp.llama_batch_init(n_batch, self.n_embd, 1)  # allocates embd, not token
        self._tokens = (llama_cpp.llama_token * n_batch)()
        self._dec.token = ctypes.cast(self._tokens, ctypes.POINTER(llama_cpp.llama_token))
        for batch in (self._enc, self._dec):
            np.ctypeslib.as_array(batch.n_seq_id, shape=(n_batch,))[:] = 1
            for i in range(n_batch):
                batch.seq_id[i][0] = 0
        np.ctypeslib.as_array(self._enc.logits, shape=(n_batch,))[:] = 1

    def _make_context(self, target: LlamaContext, n_batch: int):
        settings = target.settings
        params = llama_cpp.llama_context_default_params()
        params.ctx_other = target.handle
        params.n_ctx = target.n_ctx
        params.n_batch = params.n_ubatch = n_batch  # the encoder takes a whole batch in one ubatch
        params.n_seq_max = 1
        params.n_rs_seq = 0
        params.n_threads = settings.n_threads
        params.n_threads_batch = settings.n_threads_batch or settings.n_threads
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.no_perf = True
        handle = llama_cpp.llama_init_from_model(self.model.handle, params)
        if not handle:
            raise RuntimeError(f"llama.cpp could not create a context for the EAGLE-3 head {self.model.path.name}")
        return handle

    def encode(self, features: np.ndarray) -> np.ndarray:
        """``g`` for each feature row: ``[n, 3 * n_embd_tgt]`` in, ``[n, n_embd]`` out (a copy)."""
        out = np.empty((len(features), self.n_embd), dtype=np.float32)
        embd = np.ctypeslib.as_array(self._enc.embd, shape=(self.n_batch, self.n_fused))
        pos = np.ctypeslib.as_array(self._enc.pos, shape=(self.n_batch,))
        after = self.pos_max() + 1  # unused by the encoder graph, but llama.cpp wants them to follow the cache
        for begin in range(0, len(features), self.n_batch):
            n = min(self.n_batch, len(features) - begin)
            embd[:n] = features[begin:begin + n]
            pos[:n] = np.arange(after, after + n, dtype=np.int32)
            self._enc.n_tokens = n
            status = llama_cpp.llama_encode(self.handle, self._enc)
            if status != 0:
                raise RuntimeError(f"the EAGLE-3 head failed to encode (llama_encode returned {status})")
            g = llama_cpp_ext.llama_get_embeddings_nextn(self.handle)
            out[begin:begin + n] = np.ctypeslib.as_array(g, shape=(n, self.n_embd))
        return out

    def decode(self, tokens: list[int] | np.ndarray, g: np.ndarray, start_pos: int, *,
               all_logits: bool = False) -> None:
        """Rows ``(tokens[i], g[i])`` at positions ``start_pos + i`` into the head's KV cache."""
        token = np.ctypeslib.as_array(self._tokens)
        embd = np.ctypeslib.as_array(self._dec.embd, shape=(self.n_batch, self.n_embd))
        pos = np.ctypeslib.as_array(self._dec.pos, shape=(self.n_batch,))
        logits = np.ctypeslib.as_array(self._dec.logits, shape=(self.n_batch,))
        for begin in range(0, len(tokens), self.n_batch):
            n = min(self.n_batch, len(tokens) - begin)
            token[:n] = tokens[begin:begin + n]
            embd[:n] = g[begin:begin + n]
            pos[:n] = np.arange(start_pos + begin, start_pos + begin + n, dtype=np.int32)
            logits[:n] = 1 if all_logits else 0
            logits[n - 1] = 1
            self._dec.n_tokens = n
            status = llama_cpp.llama_decode(self.handle, self._dec)
            if status != 0:
                raise RuntimeError(f"the EAGLE-3 head failed to decode (llama_decode returned {status})")

    def logits(self, row: int = -1) -> np.ndarray:
        """The head's logits at an output row of the last decode (a view; over the target's vocabulary)."""
        pointer = llama_cpp.llama_get_logits_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,))

    def next_g(self, row: int = -1) -> np.ndarray:
        """The head's pre-norm output at an output row: the ``g`` of the next chained guess (a copy)."""
        pointer = llama_cpp_ext.llama_get_embeddings_nextn_ith(self.handle, row)
        return np.ctypeslib.as_array(pointer, shape=(self.n_embd,)).copy()

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
            if self.features.capturing and self.target.handle:
                self.features.capture(False)
            self._dec.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours, not llama_batch_free's
            llama_cpp.llama_batch_free(self._dec)
            llama_cpp.llama_batch_free(self._enc)
            llama_cpp.llama_free(self.handle)
            self.handle = None
            self.model.close()
