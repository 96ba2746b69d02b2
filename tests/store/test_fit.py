"""RAM-fit advice: the memory estimate per quantization, the verdicts and the recommendation."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from model_store import fit
from model_store.catalogue import load_catalogue, parse_catalogue
from model_store.fit import (
    RUNTIME_OVERHEAD_BYTES, ContextHere, VariantFit, advise, context_here, headroom, state_bytes, usable_context,
    verdict,
)

MiB = 1 << 20
GiB = 1 << 30


def make_entry(files, recommended="Q4_K_M", context_length=32768):
    doc = {"schema_version": 1, "models": [{
        "id": "m", "name": "M", "repo_id": "o/m", "architecture": "qwen35",
        "context_length": context_length, "has_mtp": False, "draft": None, "licence": "x",
        "description": "x", "recommended_quant": recommended, "source": "test",
        # 1 attention layer x 2 KV heads x 128 dims x K and V x f16 = 1 KiB per token;
        # 2 recurrent layers x (1 Mi + 1 Mi elements) x f32 = 16 MiB fixed.
        "state": {"attention_layers": 1, "kv_heads": 2, "head_dim": 128, "recurrent_layers": 2,
                  "conv_state_elements": 1 << 20, "ssm_state_elements": 1 << 20},
        "files": [{"quant": q, "filename": f"m-{q}.gguf", "size_bytes": size} for q, size in files],
    }]}
    return parse_catalogue(json.dumps(doc).encode(), "test").get("m")


ENTRY = make_entry([("Q4_K_M", 1 * GiB), ("Q5_K_M", 1280 * MiB), ("Q8_0", 2 * GiB)])
STATE_AT_1K = 16 * MiB + 1024 * 1024  # fixed recurrent part + 1 KiB x 1024 tokens


def test_state_is_fixed_recurrent_part_plus_kv_per_token():
    assert ENTRY.recurrent_state_bytes() == 16 * MiB
    assert ENTRY.kv_bytes_per_token() == 1024
    assert state_bytes(ENTRY, 1024) == STATE_AT_1K
    assert state_bytes(ENTRY, 2048) - state_bytes(ENTRY, 1024) == 1024 * 1024


def test_needed_adds_file_state_and_overhead():
    q4 = advise(ENTRY, 1024, available_bytes=64 * GiB)[0]
    assert q4 == VariantFit("Q4_K_M", 1 * GiB, STATE_AT_1K, 1 * GiB + STATE_AT_1K + RUNTIME_OVERHEAD_BYTES,
                            64 * GiB, "fits", True)


@pytest.mark.parametrize("needed, available, expected", [
    (70, 100, "fits"),
    (71, 100, "tight"),
    (100, 100, "tight"),
    (101, 100, "too_big"),
    (1, 0, "too_big"),
])
def test_verdict_thresholds(needed, available, expected):
    assert verdict(needed, available) == expected


def needed(quant_size):
    return quant_size + STATE_AT_1K + RUNTIME_OVERHEAD_BYTES


def fits_at(need):
    """The least available memory for which ``need`` still "fits" (70 %)."""
    return -(-need * 100 // 70)


# available memory -> verdict per quant (Q4_K_M, Q5_K_M, Q8_0) and which one is recommended
@pytest.mark.parametrize("available, verdicts, recommended", [
    (32 * GiB, ("fits", "fits", "fits"), "Q4_K_M"),          # the entry's choice when it fits
    (fits_at(needed(GiB)), ("fits", "tight", "too_big"), "Q4_K_M"),
    (fits_at(needed(GiB)) - 1, ("tight", "tight", "too_big"), None),  # nothing fits comfortably
    (needed(GiB), ("tight", "too_big", "too_big"), None),
    (needed(GiB) - 1, ("too_big", "too_big", "too_big"), None),
])
def test_verdicts_and_recommendation_by_available_memory(available, verdicts, recommended):
    result = advise(ENTRY, 1024, available_bytes=available)
    assert tuple(v.verdict for v in result) == verdicts
    assert [v.quant for v in result if v.recommended] == ([recommended] if recommended else [])
    assert all(v.available_bytes == available for v in result)


def test_largest_fitting_variant_is_recommended_when_the_entrys_choice_does_not_fit():
    entry = make_entry([("Q4_K_M", 1 * GiB), ("Q5_K_M", 1280 * MiB), ("Q8_0", 2 * GiB)],
                       recommended="Q8_0")
    available = fits_at(needed(1280 * MiB))  # Q4 and Q5 fit, Q8 does not
    result = {v.quant: v for v in advise(entry, 1024, available_bytes=available)}
    assert result["Q8_0"].verdict != "fits"
    assert [q for q, v in result.items() if v.recommended] == ["Q5_K_M"]


def test_longer_context_can_turn_a_fit_into_tight():
    available = fits_at(needed(GiB))
    short = advise(ENTRY, 1024, available_bytes=available)[0]
    long = advise(ENTRY, 32768, available_bytes=available)[0]
    assert long.state_bytes - short.state_bytes == 31 * 1024 * 1024
    assert (short.verdict, long.verdict) == ("fits", "tight")


@pytest.mark.parametrize("context", [0, -1, 32769])
def test_context_outside_the_model_is_refused(context):
    with pytest.raises(ValueError, match="context"):
        advise(ENTRY, context, available_bytes=GiB)


def test_available_memory_defaults_to_psutil(monkeypatch):
    monkeypatch.setattr(fit.psutil, "virtual_memory", lambda: SimpleNamespace(available=3 * GiB))
    assert {v.available_bytes for v in advise(ENTRY, 1024)} == {3 * GiB}


def test_packaged_models_get_advice_for_every_file():
    for entry in load_catalogue():
        result = advise(entry, min(4096, entry.context_length), available_bytes=16 * GiB)
        assert [v.quant for v in result] == [f.quant for f in entry.files]
        assert sum(v.recommended for v in result) <= 1
        assert all(v.needed_bytes > v.file_bytes for v in result)


def test_hybrid_state_grows_far_slower_than_a_transformers():
    catalogue = load_catalogue()
    hybrid, plain = catalogue.get("qwen3.5-2b"), catalogue.get("llama-3.2-1b-instruct")
    growth = lambda e: state_bytes(e, 32768) - state_bytes(e, 1024)  # noqa: E731
    assert growth(hybrid) * 2 < growth(plain)


@pytest.mark.parametrize("memory, trained, usable", [
    (1_293_056, 262_144, 262_144),  # memory would hold more: the trained length is the limit
    (190_208, 262_144, 190_208),  # memory is the limit
    (262_144, 262_144, 262_144),
    (9_000, 8_000, 7_936),  # llama.cpp's step: the worker's automatic context, not one token more
    (0, 32_768, 0),
])
def test_the_usable_context_is_what_memory_holds_never_past_the_trained_length(memory, trained, usable):
    assert usable_context(memory, trained) == usable
    here = ContextHere(memory, trained)
    assert here.tokens == usable and here.has_headroom == (memory > usable)


def test_a_file_on_a_big_machine_uses_its_trained_length_and_the_rest_is_headroom():
    memory, transformer_memory = headroom(ENTRY, GiB, 64 * GiB)
    assert transformer_memory > ENTRY.context_length, "even a transformer's memory figure passes 32k here"
    here, transformer = context_here(ENTRY, GiB, 64 * GiB)
    assert (here.memory_tokens, transformer.memory_tokens) == (memory, transformer_memory), "uncapped, as before"
    assert here.tokens == transformer.tokens == ENTRY.context_length == 32768
    assert here.has_headroom and transformer.has_headroom and here.memory_tokens > transformer.memory_tokens


def test_a_file_on_a_small_machine_uses_what_memory_holds_with_no_headroom():
    available = fits_at(needed(GiB)) + 40 * MiB  # about 1.7 GiB: 70 % of it holds 15k-30k tokens
    here, transformer = context_here(ENTRY, GiB, available)
    assert 0 < transformer.tokens < here.tokens < ENTRY.context_length
    assert (here.tokens, transformer.tokens) == headroom(ENTRY, GiB, available)
    assert not here.has_headroom and not transformer.has_headroom


def test_packaged_models_never_use_more_context_than_they_were_trained_on():
    for entry in load_catalogue():
        for file in entry.files:
            for here in context_here(entry, file.size_bytes, 1024 * GiB):
                assert here.tokens == entry.context_length and here.memory_tokens > here.tokens, entry.id
