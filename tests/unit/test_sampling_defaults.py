"""A model's default sampling: the GGUF's own ``general.sampling.*`` keys first, then its family's
published values in the catalogue (thinking on or off), then Hearth's; the user's on top. Real GGUF
files written with the gguf package, read back by Hearth's own reader; the shipped catalogue."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from app.services.sampling_defaults import resolve_sampling
from engine import protocol as p
from model_store.catalogue import load_catalogue


def write_model(path: Path, arch: str, sampling: dict[str, float | int]) -> Path:
    """A small but real GGUF file of ``arch`` carrying ``general.sampling.<key>`` entries."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    for key, value in sampling.items():
        if isinstance(value, int):
            writer.add_int32(f"general.sampling.{key}", value)
        else:
            writer.add_float32(f"general.sampling.{key}", value)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_files_own_keys_come_first_then_the_catalogue_then_hearth(tmp_path):
    lfm2 = load_catalogue().get("lfm2-350m").sampling  # publishes temperature, min_p and repeat_penalty
    model = write_model(tmp_path / "my-lfm2.gguf", "lfm2", {"temp": 0.5, "top_k": 12, "penalty_repeat": 1.2})
    resolved = resolve_sampling(model)
    assert resolved.values == {"temperature": 0.5, "top_k": 12, "repeat_penalty": pytest.approx(1.2),
                               "min_p": lfm2.min_p, "top_p": p.DEFAULTS.sampling.top_p}
    assert resolved.sources == {"temperature": "model", "top_k": "model", "repeat_penalty": "model",
                                "min_p": "catalogue", "top_p": "hearth"}
    assert [resolved.label(name) for name in ("temperature", "min_p", "top_p")] == [
        "from the model", "from the catalogue", "Hearth's default"]


def test_a_value_the_protocol_refuses_is_passed_over_for_the_next_source(tmp_path):
    lfm2 = load_catalogue().get("lfm2-350m").sampling
    model = write_model(tmp_path / "odd.gguf", "lfm2", {"penalty_repeat": 0.5, "top_p": 0.0, "temp": -1.0})
    resolved = resolve_sampling(model)
    assert (resolved.values["repeat_penalty"], resolved.sources["repeat_penalty"]) == (lfm2.repeat_penalty,
                                                                                       "catalogue")
    assert (resolved.values["top_p"], resolved.sources["top_p"]) == (p.DEFAULTS.sampling.top_p, "hearth")
    assert (resolved.values["temperature"], resolved.sources["temperature"]) == (lfm2.temperature, "catalogue")


def test_a_family_that_publishes_values_for_thinking_gets_them_with_thinking_on(tmp_path):
    qwen = load_catalogue().get("qwen3.5-0.8b").sampling
    model = write_model(tmp_path / "a-qwen.gguf", "qwen35", {})
    off, on = resolve_sampling(model), resolve_sampling(model, thinking=True)
    assert (off.values["temperature"], off.values["top_p"], off.values["top_k"]) == (
        qwen.temperature, qwen.top_p, qwen.top_k)
    assert (on.values["temperature"], on.values["top_p"], on.values["top_k"]) == (
        qwen.thinking.temperature, qwen.thinking.top_p, qwen.top_k)
    assert on.values["temperature"] != off.values["temperature"] and set(on.sources.values()) == {"catalogue"}


def test_an_architecture_unrelated_families_share_matches_the_catalogue_only_by_file_name(tmp_path):
    llama = load_catalogue().get("llama-3.2-1b-instruct")
    named = write_model(tmp_path / llama.file().filename.rsplit("/", 1)[-1], "llama", {})
    other = write_model(tmp_path / "someone-elses-llama.gguf", "llama", {})
    assert resolve_sampling(named).values["temperature"] == llama.sampling.temperature
    assert resolve_sampling(named).sources["temperature"] == "catalogue"
    assert set(resolve_sampling(other).sources.values()) == {"hearth"}


def test_the_users_values_win_and_are_labelled_yours(tmp_path):
    model = write_model(tmp_path / "mine.gguf", "lfm2", {"temp": 0.5})
    resolved = resolve_sampling(model).with_yours(temperature=0.0, top_k=None, repeat_penalty=1.3)
    assert resolved.spec(seed=7) == p.SamplingSpec(
        temperature=0.0, top_k=resolved.values["top_k"], top_p=resolved.values["top_p"],
        min_p=resolved.values["min_p"], repeat_penalty=1.3, seed=7)
    assert (resolved.label("temperature"), resolved.label("repeat_penalty")) == ("yours", "yours")
    assert resolved.sources["top_k"] != "yours"


def test_the_built_in_model_gets_hearths_defaults_and_they_penalise_repeats():
    resolved = resolve_sampling("default")
    assert set(resolved.sources.values()) == {"hearth"}
    assert resolved.spec() == p.DEFAULTS.sampling
    assert resolved.values["repeat_penalty"] > 1.0  # 1.0 let SmolLM2 go round in circles (issue 51)


def test_every_published_value_in_the_catalogue_is_one_the_protocol_takes():
    for entry in load_catalogue():
        advice = entry.sampling
        assert advice is not None and advice.source.strip(), entry.id
        for values in (advice, advice.thinking):
            for name in ("temperature", "top_k", "top_p", "min_p", "repeat_penalty"):
                value = getattr(values, name, None) if values is not None else None
                assert value is None or p.sampling_problem(name, value) is None, (entry.id, name, value)


def test_an_api_request_sets_what_it_sends_and_the_model_gives_the_rest(tmp_path):
    from app.serve import schema

    model = write_model(tmp_path / "served.gguf", "lfm2", {"temp": 0.5, "penalty_repeat": 1.2})
    body = schema.decode_body(b'{"model": "m", "messages": [], "temperature": 0, "top_k": 7}', schema.ChatRequest)
    spec = schema.sampling_spec(body, resolve_sampling(model))
    lfm2 = load_catalogue().get("lfm2-350m").sampling
    assert (spec.temperature, spec.top_k) == (0.0, 7)  # the request's own
    assert (spec.repeat_penalty, spec.min_p) == (pytest.approx(1.2), lfm2.min_p)  # the file's, the family's
    unset = schema.decode_body(b'{"model": "default", "messages": []}', schema.ChatRequest)
    assert schema.sampling_spec(unset) == p.DEFAULTS.sampling  # the built-in model: Hearth's, not OpenAI's 1.0
