"""How much memory a model takes at a context length, and which context to create.

llama.cpp allocates a context's attention cache (K and V of every attention layer for every
position) when the context is created, and clears it, so the whole cache is resident at once; asked
for 2^31 tokens it works for most of a minute before it fails. Everything the estimate needs is in
the model file's metadata, so the context is chosen, or an impossible one refused, before loading::

    total = RUNTIME_OVERHEAD_BYTES        the worker and llama.cpp's compute buffers (model_store.fit)
          + file bytes                    the weights, memory-mapped and all touched
          + recurrent bytes x planes      fixed per sequence; a rollback-capable context keeps copies
          + KV bytes per token x n_ctx    attention layers only; sliding-window layers stop at the window

KV bytes per token per attention layer are ``kv_heads x (key_length + value_length)`` elements of
the cache's type: f16 (2 bytes) or q8_0 (34 bytes per block of 32). Recurrent layers (Gated
DeltaNet, Mamba, short convolutions) keep a fixed state instead, f32, sized as llama.cpp sizes it:
a convolution window of ``(conv_kernel - 1) x (inner_size + 2 x group_count x state_size)`` and an
SSM state of ``state_size x inner_size`` per layer; LFM2's short convolution keeps
``embedding_length x (l_cache - 1)``. That is why hybrids hold long contexts: only one layer in
four (qwen35) grows with the context.

Which layers have attention: a per-layer ``attention.head_count_kv`` array (0 for the recurrent
layers: lfm2, nemotron_h, granitehybrid), or every ``full_attention_interval``-th layer (qwen35,
qwen3next); otherwise all of them. A model without ``attention.head_count`` has none (mamba).

The automatic context is the longest that fits ``percent`` of the memory available now, capped at
the trained length (:func:`model_store.fit.longest_context`, the rule the catalogue's headroom uses
too); a fixed one is refused when it exceeds all of the available memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.backends.base import ModelLoadError
from model_store.catalogue_schema import KV_BYTES_PER_ELEMENT, RECURRENT_BYTES_PER_ELEMENT
from model_store.fit import (CONTEXT_STEP, DEFAULT_BUDGET_PERCENT, RUNTIME_OVERHEAD_BYTES, available_memory,
                             longest_context, memory_budget)
from model_store.gguf_meta import Value

__all__ = ["CONTEXT_STEP", "AttentionCache", "ContextPlan", "ModelMemory", "attention_cache", "model_memory",
           "plan_context"]

# Every n-th layer attends to the whole context, the others to a sliding window (llama.cpp's
# swa_pattern per architecture); where it is not known here, every layer counts as windowed.
GLOBAL_LAYER_EVERY = {"gemma3": 6, "gemma2": 2, "cohere2": 4, "gpt-oss": 2}
# Bytes of one K/V element per cache type, as (numerator, denominator): q8_0 keeps 32 values in 34 bytes.
KV_TYPE_BYTES = {"f16": (KV_BYTES_PER_ELEMENT, 1), "q8_0": (34, 32)}
UNKNOWN_TRAINED_CONTEXT = 8192  # the cap of an automatic context when the file does not say its trained length


@dataclass(frozen=True)
class AttentionCache:
    """What each token of context costs in f16: in the layers that see all of it, and in the windowed ones."""

    full_bytes_per_token: int = 0
    windowed_bytes_per_token: int = 0
    window: int = 0

    def bytes_for(self, n_ctx: int, kv_type: str = "f16") -> int:
        num, den = KV_TYPE_BYTES[kv_type]
        f16 = self.full_bytes_per_token * n_ctx + self.windowed_bytes_per_token * min(n_ctx, self.window)
        return f16 * num // (den * KV_BYTES_PER_ELEMENT)


@dataclass(frozen=True)
class ModelMemory:
    """A model file's memory at any context: fixed parts plus the attention cache."""

    file_bytes: int
    recurrent_bytes: int  # one copy of one sequence's fixed state
    cache: AttentionCache
    n_ctx_train: int

    def kv_bytes(self, n_ctx: int, kv_type: str = "f16") -> int:
        return self.cache.bytes_for(n_ctx, kv_type)

    def total_bytes(self, n_ctx: int, kv_type: str = "f16", planes: int = 1) -> int:
        """Resident bytes of a worker with this model and a context of ``n_ctx`` tokens; ``planes``:
        copies of the recurrent state (1 + the rollback planes a drafting context keeps)."""
        fixed = RUNTIME_OVERHEAD_BYTES + self.file_bytes + self.recurrent_bytes * planes
        return fixed + self.kv_bytes(n_ctx, kv_type)


@dataclass(frozen=True)
class ContextPlan:
    """The context to create, and the numbers it was chosen from (reported as p.ContextReport)."""

    n_ctx: int
    mode: str  # "auto" | "fixed"
    kv_type: str
    kv_bytes: int
    estimated_bytes: int
    available_bytes: int
    budget_bytes: int
    max_n_ctx: int  # the longest context the budget holds now (capped at the trained length)


def attention_cache(metadata: dict[str, Value]) -> AttentionCache:
    """The attention cache's f16 cost per token, from a GGUF file's metadata (see the module's docstring)."""
    key = _keys(metadata)
    n_layer, heads = _int(key("block_count")), key("attention.head_count")
    if not n_layer or heads is None:
        return AttentionCache()
    window = _int(key("attention.sliding_window"))
    global_every = GLOBAL_LAYER_EVERY.get(str(metadata.get("general.architecture", "")))
    full = windowed = 0
    for layer in _attention_layers(metadata):
        n_kv = _per_layer(heads if key("attention.head_count_kv") is None else key("attention.head_count_kv"), layer)
        width = _int(key("embedding_length")) // max(1, _per_layer(heads, layer))
        values = n_kv * ((_int(key("attention.key_length")) or width) + (_int(key("attention.value_length")) or width))
        if window and not (global_every and (layer + 1) % global_every == 0):
            windowed += values * KV_BYTES_PER_ELEMENT
        else:
            full += values * KV_BYTES_PER_ELEMENT
    return AttentionCache(full, windowed, window)


def recurrent_bytes(metadata: dict[str, Value]) -> int:
    """One sequence's fixed recurrent state (f32, every recurrent layer), from the metadata."""
    key = _keys(metadata)
    n_layer = _int(key("block_count")) - _int(key("nextn_predict_layers"))
    recurrent = n_layer - len([layer for layer in _attention_layers(metadata) if layer < n_layer])
    if recurrent <= 0:
        return 0
    l_cache = _int(key("shortconv.l_cache"))
    if l_cache:  # lfm2: a short convolution's window of the embedding
        per_layer = _int(key("embedding_length")) * (l_cache - 1)
    else:
        inner, state = _int(key("ssm.inner_size")), _int(key("ssm.state_size"))
        conv = max(0, _int(key("ssm.conv_kernel")) - 1) * (inner + 2 * _int(key("ssm.group_count")) * state)
        per_layer = conv + state * inner
    return recurrent * per_layer * RECURRENT_BYTES_PER_ELEMENT


def model_memory(path: Path, metadata: dict[str, Value]) -> ModelMemory:
    key = _keys(metadata)
    return ModelMemory(file_bytes=path.stat().st_size, recurrent_bytes=recurrent_bytes(metadata),
                       cache=attention_cache(metadata), n_ctx_train=_int(key("context_length")))


def plan_context(path: Path, memory: ModelMemory, requested: int | None, *, kv_type: str = "f16", planes: int = 1,
                 percent: int = DEFAULT_BUDGET_PERCENT, available: int | None = None) -> ContextPlan:
    """The context to create: ``requested`` tokens (at least :data:`CONTEXT_STEP`), or for None
    the longest that ``percent`` of the available memory holds, capped at the trained length.

    Raises:
        ModelLoadError: A fixed context that needs more than all the available memory, or a model
            that leaves no room for even the shortest context; the message has the numbers.
    """
    free = available_memory() if available is None else available
    budget = memory_budget(free, percent)
    trained = memory.n_ctx_train or UNKNOWN_TRAINED_CONTEXT

    def total(n_ctx: int) -> int:
        return memory.total_bytes(n_ctx, kv_type, planes)

    longest = longest_context(total, budget, trained)
    if requested:
        n_ctx, mode = max(requested, CONTEXT_STEP), "fixed"
        if total(n_ctx) > free:
            raise ModelLoadError(path, _too_big(n_ctx, total(n_ctx), memory, kv_type, longest_context(total, free, n_ctx),
                                                f"only {_gib(free)} is available"))
    else:
        n_ctx, mode = longest, "auto"
        if not n_ctx:
            raise ModelLoadError(path, _too_big(CONTEXT_STEP, total(CONTEXT_STEP), memory, kv_type, 0,
                                                f"an automatic context may use {percent} % of the {_gib(free)} "
                                                f"available ({_gib(budget)})"))
    return ContextPlan(n_ctx=n_ctx, mode=mode, kv_type=kv_type, kv_bytes=memory.kv_bytes(n_ctx, kv_type),
                       estimated_bytes=total(n_ctx), available_bytes=free, budget_bytes=budget, max_n_ctx=longest)


def _too_big(n_ctx: int, need: int, memory: ModelMemory, kv_type: str, fits: int, room: str) -> str:
    parts = (f"the model file {_gib(memory.file_bytes)}, its attention cache {_gib(memory.kv_bytes(n_ctx, kv_type))}"
             f", the rest {_gib(need - memory.file_bytes - memory.kv_bytes(n_ctx, kv_type))}")
    advice = (f"choose a shorter context: about {fits} tokens fit now" if fits else
              "close other programs, or choose a smaller model or quantization")
    if kv_type == "f16" and memory.cache.full_bytes_per_token:
        advice += "; the 8-bit KV cache option halves the attention cache"
    return f"a context of {n_ctx} tokens needs about {_gib(need)} of memory ({parts}), but {room}; {advice}"


def _keys(metadata: dict[str, Value]):
    arch = str(metadata.get("general.architecture", ""))
    return lambda name: metadata.get(f"{arch}.{name}")


def _attention_layers(metadata: dict[str, Value]) -> list[int]:
    key = _keys(metadata)
    n_layer, heads = _int(key("block_count")), key("attention.head_count")
    if not n_layer or heads is None:
        return []
    kv_heads = heads if key("attention.head_count_kv") is None else key("attention.head_count_kv")
    interval = _int(key("full_attention_interval"))
    return [layer for layer in range(n_layer)
            if _per_layer(kv_heads, layer) and not (interval and (layer + 1) % interval)]


def _per_layer(value: Value | None, layer: int) -> int:
    if isinstance(value, list):
        return _int(value[layer]) if layer < len(value) else 0
    return _int(value)


def _int(value: Value | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"
