"""The memory a context needs, from a model file's metadata: the attention cache (issue 16, point
6), the recurrent state, the automatic context and the 8-bit cache (issue 19), and the refusal of a
context that cannot fit. The estimate is checked against what llama.cpp really keeps
per token; the refusal through a real worker is in tests/process/test_numeric_ranges.py."""

from __future__ import annotations

import time

import pytest

from engine.backends.base import ModelLoadError
from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.context.context_memory import (
    CONTEXT_STEP, AttentionCache, ModelMemory, attention_cache, model_memory, plan_context, recurrent_bytes,
)
from engine.models.model_files import check_model_file
from engine.models.session import open_session

GIB = 2**30


def transformer(**extra) -> dict:
    return {"general.architecture": "llama", "llama.block_count": 30, "llama.attention.head_count": 9,
            "llama.attention.head_count_kv": 3, "llama.embedding_length": 576, **extra}


@pytest.mark.parametrize("metadata, expected", [
    # 30 layers x 3 KV heads x (64 + 64) values x 2 bytes: head size from the embedding width (576 / 9)
    (transformer(), AttentionCache(30 * 3 * 128 * 2)),
    (transformer(**{"llama.attention.key_length": 128, "llama.attention.value_length": 32}),
     AttentionCache(30 * 3 * 160 * 2)),
    # qwen35: every 4th of 8 layers has attention
    ({"general.architecture": "qwen35", "qwen35.block_count": 8, "qwen35.full_attention_interval": 4,
      "qwen35.attention.head_count": 8, "qwen35.attention.head_count_kv": 2, "qwen35.embedding_length": 1024,
      "qwen35.attention.key_length": 256, "qwen35.attention.value_length": 256}, AttentionCache(2 * 2 * 512 * 2)),
    # lfm2: a per-layer array, 0 for the convolution layers
    ({"general.architecture": "lfm2", "lfm2.block_count": 4, "lfm2.attention.head_count": 16,
      "lfm2.attention.head_count_kv": [0, 8, 0, 8], "lfm2.embedding_length": 1024}, AttentionCache(2 * 8 * 128 * 2)),
    # mamba2: no attention at all
    ({"general.architecture": "mamba2", "mamba2.block_count": 48, "mamba2.embedding_length": 2048}, AttentionCache()),
    # gemma3: every 6th layer sees the whole context, the others a window
    ({"general.architecture": "gemma3", "gemma3.block_count": 12, "gemma3.attention.head_count": 4,
      "gemma3.attention.head_count_kv": 1, "gemma3.embedding_length": 1024, "gemma3.attention.key_length": 256,
      "gemma3.attention.value_length": 256, "gemma3.attention.sliding_window": 512},
     AttentionCache(2 * 512 * 2, 10 * 512 * 2, 512)),
])
def test_attention_cache_per_architecture(metadata, expected):
    assert attention_cache(metadata) == expected


def test_a_window_bounds_what_windowed_layers_keep():
    cache = AttentionCache(full_bytes_per_token=10, windowed_bytes_per_token=100, window=512)
    assert cache.bytes_for(256) == 256 * 110
    assert cache.bytes_for(1 << 20) == 10 * (1 << 20) + 100 * 512


@pytest.mark.parametrize("model", ["smollm2", "hybrid_tiny"])
def test_the_estimate_is_what_llama_cpp_keeps_per_token(request, model):
    """Each token adds exactly the estimated K and V bytes to the sequence's state, plus llama.cpp's
    few bytes of cell bookkeeping (position and sequence ids)."""
    path = request.getfixturevalue(model)
    session = open_session(str(path), n_ctx=512)
    try:
        hybrid = session.facts.is_hybrid

        def kv_bytes() -> int:
            fixed = session.context.state_size(0, STATE_PARTIAL_ONLY) if hybrid else 0
            return session.context.state_size(0) - fixed

        tokens = session.model.tokenize("a few words to read, " * 40, add_special=False, parse_special=False)
        session.feed(tokens[:64])
        before = kv_bytes()
        session.feed(tokens[64:192])
        per_token = (kv_bytes() - before) / 128
    finally:
        session.close()
    estimate = attention_cache(check_model_file(path)).full_bytes_per_token
    assert estimate > 0 and 0 <= per_token - estimate <= 32


def test_the_recurrent_estimate_is_what_llama_cpp_keeps(hybrid_tiny):
    """The fixed part of a hybrid's state, from the metadata, equals llama.cpp's own (one plane)."""
    session = open_session(str(hybrid_tiny), n_ctx=512)
    try:
        session.feed(session.model.tokenize("a few words", add_special=False, parse_special=False))
        measured = session.context.state_size(0, STATE_PARTIAL_ONLY)
    finally:
        session.close()
    estimate = recurrent_bytes(check_model_file(hybrid_tiny))
    assert estimate > 0 and 0 <= measured - estimate <= 256  # llama.cpp adds a few bytes of bookkeeping


def memory_of(path) -> ModelMemory:
    return model_memory(path, check_model_file(path))


def test_a_fixed_context_that_cannot_fit_is_refused_with_the_need_and_what_fits(hybrid_tiny):
    memory = memory_of(hybrid_tiny)
    available = 3 * GIB
    with pytest.raises(ModelLoadError) as refused:
        plan_context(hybrid_tiny, memory, 2**31 - 1, available=available)
    reason = refused.value.reason
    assert reason.startswith("a context of 2147483647 tokens needs about ") and "but only 3.0 GiB is available" in reason
    fits = int(reason.split("about ")[-1].split(" tokens fit")[0])
    assert memory.total_bytes(fits) <= available < memory.total_bytes(fits + CONTEXT_STEP)
    assert plan_context(hybrid_tiny, memory, fits, available=available).n_ctx == fits  # what it suggests is accepted
    assert "8-bit KV cache" in reason


def test_auto_is_the_longest_context_the_budget_holds_capped_at_the_trained_length(hybrid_tiny):
    memory = memory_of(hybrid_tiny)
    roomy = plan_context(hybrid_tiny, memory, None, available=64 * GIB)
    assert (roomy.mode, roomy.n_ctx) == ("auto", memory.n_ctx_train)
    budget = memory.total_bytes(1024) + memory.kv_bytes(100)  # 1,024 tokens and a little: not 1,280
    small = plan_context(hybrid_tiny, memory, None, available=budget * 100 // 70 + 1)
    assert small.n_ctx == 1024 and small.estimated_bytes <= small.budget_bytes
    with pytest.raises(ModelLoadError, match=r"an automatic context may use 35 % of the"):
        plan_context(hybrid_tiny, memory, None, percent=35, available=budget * 100 // 70 + 1)


def test_the_8_bit_cache_takes_17_32_of_the_16_bit_one_and_holds_more_tokens(smollm2):
    memory = memory_of(smollm2)
    assert memory.kv_bytes(8192, "q8_0") * 32 == memory.kv_bytes(8192) * 17
    available = memory.total_bytes(4096) * 100 // 70
    assert plan_context(smollm2, memory, None, kv_type="q8_0", available=available).n_ctx > \
        plan_context(smollm2, memory, None, available=available).n_ctx


def test_when_nothing_fits_it_says_so(hybrid_tiny):
    with pytest.raises(ModelLoadError, match="close other programs, or choose a smaller model"):
        plan_context(hybrid_tiny, memory_of(hybrid_tiny), None, available=1000)


def test_open_session_refuses_before_loading_anything(smollm2):
    started = time.monotonic()
    with pytest.raises(ModelLoadError, match=r"needs about [\d,.]+ GiB of memory .* shorter context"):
        open_session(str(smollm2), n_ctx=2**31 - 1)
    assert time.monotonic() - started < 5  # the file's metadata only, no weights and no context
