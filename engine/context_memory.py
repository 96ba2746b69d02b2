"""Will a context of n tokens fit in memory? Worked out from the model file before llama.cpp tries.

llama.cpp allocates a context's attention cache (K and V of every attention layer for every
position) when the context is created; asked for 2^31 tokens it works for most of a minute before
it fails. The cache's size follows from the model's metadata, so an impossible context is refused
at once, with what it needs, what is available and the longest context that would fit::

    bytes = sum over attention layers l of  kv_heads(l) x (key_length + value_length) x 2 (f16)
                                            x tokens(l)

where ``tokens(l)`` is the context, or the sliding window for a layer that only looks that far back.
Recurrent layers (Gated DeltaNet, Mamba, short convolutions) keep a fixed-size state instead and are
left out, as are the weights and compute buffers: the estimate is a lower bound, so a refusal is
certain, never a guess that a context which would have fitted does not.

Which layers have attention: a per-layer ``attention.head_count_kv`` array (0 for the recurrent
layers: lfm2, nemotron_h, granitehybrid), or every ``full_attention_interval``-th layer (qwen35,
qwen3next); otherwise all of them. A model without ``attention.head_count`` has none (mamba).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.backends.base import ModelLoadError
from model_store.catalogue_schema import KV_BYTES_PER_ELEMENT
from model_store.fit import available_memory
from model_store.gguf_meta import Value

CONTEXT_STEP = 256  # llama.cpp sizes every context in multiples of this many tokens
# Every n-th layer attends to the whole context, the others to a sliding window (llama.cpp's
# swa_pattern per architecture); where it is not known here, every layer counts as windowed.
GLOBAL_LAYER_EVERY = {"gemma3": 6, "gemma2": 2, "cohere2": 4, "gpt-oss": 2}


@dataclass(frozen=True)
class AttentionCache:
    """What each token of context costs: in the layers that see all of it, and in the windowed ones."""

    full_bytes_per_token: int = 0
    windowed_bytes_per_token: int = 0
    window: int = 0

    def bytes_for(self, n_ctx: int) -> int:
        return self.full_bytes_per_token * n_ctx + self.windowed_bytes_per_token * min(n_ctx, self.window)

    def longest_fitting(self, free: int, below: int) -> int:
        """The longest context (a multiple of :data:`CONTEXT_STEP`, at most ``below``) that fits ``free``; 0: none."""
        low, high = 0, below // CONTEXT_STEP
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if self.bytes_for(middle * CONTEXT_STEP) <= free else (low, middle - 1)
        return low * CONTEXT_STEP


def attention_cache(metadata: dict[str, Value]) -> AttentionCache:
    """The attention cache's cost per token, from a GGUF file's metadata (see the module's docstring)."""
    arch = str(metadata.get("general.architecture", ""))

    def key(name: str) -> Value | None:
        return metadata.get(f"{arch}.{name}")

    n_layer, heads = _int(key("block_count")), key("attention.head_count")
    if not n_layer or heads is None:
        return AttentionCache()
    kv_heads = heads if key("attention.head_count_kv") is None else key("attention.head_count_kv")
    interval = _int(key("full_attention_interval"))
    window = _int(key("attention.sliding_window"))
    global_every = GLOBAL_LAYER_EVERY.get(arch)
    full = windowed = 0
    for layer in range(n_layer):
        n_kv = _per_layer(kv_heads, layer)
        if n_kv == 0 or (interval and (layer + 1) % interval):
            continue  # a recurrent layer
        width = _int(key("embedding_length")) // max(1, _per_layer(heads, layer))
        values = n_kv * ((_int(key("attention.key_length")) or width) + (_int(key("attention.value_length")) or width))
        if window and not (global_every and (layer + 1) % global_every == 0):
            windowed += values * KV_BYTES_PER_ELEMENT
        else:
            full += values * KV_BYTES_PER_ELEMENT
    return AttentionCache(full, windowed, window)


def check_context_fits(path: Path, metadata: dict[str, Value], n_ctx: int, available: int | None = None) -> None:
    """Raise :class:`ModelLoadError` if a context of ``n_ctx`` tokens cannot fit in the memory
    available now (``available`` bytes, measured when None)."""
    cache = attention_cache(metadata)
    need = cache.bytes_for(n_ctx)
    free = available_memory() if available is None else available
    if need <= free:
        return
    fits = cache.longest_fitting(free, n_ctx)
    advice = (f"choose a shorter context: about {fits} tokens fit now" if fits else
              "even the shortest context does not fit now: close other programs, or choose a smaller model")
    raise ModelLoadError(path, f"a context of {n_ctx} tokens needs at least {_gib(need)} of memory for its attention "
                               f"cache, but only {_gib(free)} is available; {advice}")


def _per_layer(value: Value | None, layer: int) -> int:
    if isinstance(value, list):
        return _int(value[layer]) if layer < len(value) else 0
    return _int(value)


def _int(value: Value | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"
