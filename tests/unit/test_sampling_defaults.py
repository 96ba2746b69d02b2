"""A model's default sampling: the GGUF's own ``general.sampling.*`` keys first, then its family's
published values in the catalogue (thinking on or off), then Hearth's; the user's on top. Real GGUF
files written with the gguf package, read back by Hearth's own reader; the shipped catalogue."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from app.services.sampling_defaults import resolve_sampling
from engine import protocol as p
from model_store.catalogue import load_catalogue

CATALOGUE_JSON = Path(__file__).resolve().parents[2] / "model_store" / "catalogue.json"


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
                               "min_p": lfm2.min_p, "top_p": p.DEFAULTS.sampling.top_p,
                               "repeat_last_n": p.DEFAULTS.sampling.repeat_last_n,
                               "dry_multiplier": p.DEFAULTS.sampling.dry_multiplier}
    assert resolved.sources == {"temperature": "model", "top_k": "model", "repeat_penalty": "model",
                                "min_p": "catalogue", "top_p": "hearth", "repeat_last_n": "hearth",
                                "dry_multiplier": "hearth"}
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
    published = {name: source for name, source in on.sources.items()
                 if name not in ("repeat_last_n", "dry_multiplier")}  # Qwen gives no window, nobody a phrase penalty
    assert on.values["temperature"] != off.values["temperature"] and set(published.values()) == {"catalogue"}


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
    from app.surfaces.serve import schema

    model = write_model(tmp_path / "served.gguf", "lfm2", {"temp": 0.5, "penalty_repeat": 1.2})
    body = schema.decode_body(b'{"model": "m", "messages": [], "temperature": 0, "top_k": 7}', schema.ChatRequest)
    spec = schema.sampling_spec(body, resolve_sampling(model))
    lfm2 = load_catalogue().get("lfm2-350m").sampling
    assert (spec.temperature, spec.top_k) == (0.0, 7)  # the request's own
    assert (spec.repeat_penalty, spec.min_p) == (pytest.approx(1.2), lfm2.min_p)  # the file's, the family's
    unset = schema.decode_body(b'{"model": "default", "messages": []}', schema.ChatRequest)
    assert schema.sampling_spec(unset) == p.DEFAULTS.sampling  # the built-in model: Hearth's, not OpenAI's 1.0


# --- the repeat penalty's window: general.sampling.penalty_last_n, as llama.cpp reads it ------------

@pytest.mark.parametrize("window", [256, 8, 0, -1])
def test_a_files_penalty_last_n_is_the_repeat_window(tmp_path, window):
    """-1 (the whole answer) and 0 (no penalty) are llama.cpp's meanings and are taken as they are."""
    model = write_model(tmp_path / "windowed.gguf", "lfm2", {"penalty_last_n": window})
    resolved = resolve_sampling(model)
    assert (resolved.values["repeat_last_n"], resolved.label("repeat_last_n")) == (window, "from the model")
    assert resolved.spec().repeat_last_n == window and type(resolved.spec().repeat_last_n) is int


def test_a_window_the_protocol_refuses_is_passed_over_and_hearths_is_64(tmp_path):
    model = write_model(tmp_path / "odd-window.gguf", "lfm2", {"penalty_last_n": -7})
    resolved = resolve_sampling(model)
    assert (resolved.values["repeat_last_n"], resolved.sources["repeat_last_n"]) == (64, "hearth")
    assert p.DEFAULTS.sampling.repeat_last_n == p.REPEAT_WINDOW == 64


def test_the_catalogues_window_comes_after_the_files_and_the_user_wins(tmp_path):
    """A family's ``repeat_last_n`` in catalogue.json (the real file, with one value added) is used
    when the GGUF has none; the file's own key comes first, and the user's value over both."""
    document = json.loads(CATALOGUE_JSON.read_text())
    lfm2 = next(model for model in document["models"] if model["id"] == "lfm2-350m")
    lfm2["sampling"]["repeat_last_n"] = 128
    (tmp_path / "catalogue.json").write_text(json.dumps(document))
    catalogue = load_catalogue(tmp_path / "catalogue.json")
    plain = write_model(tmp_path / "plain-lfm2.gguf", "lfm2", {})
    keyed = write_model(tmp_path / "keyed-lfm2.gguf", "lfm2", {"penalty_last_n": 32})
    from_catalogue = resolve_sampling(plain, catalogue=catalogue)
    assert (from_catalogue.values["repeat_last_n"], from_catalogue.sources["repeat_last_n"]) == (128, "catalogue")
    assert resolve_sampling(keyed, catalogue=catalogue).values["repeat_last_n"] == 32
    yours = from_catalogue.with_yours(repeat_last_n=-1)
    assert (yours.spec().repeat_last_n, yours.label("repeat_last_n")) == (-1, "yours")


def test_the_api_field_repeat_last_n_sets_the_window_and_is_checked(tmp_path):
    from app.surfaces.serve import schema

    model = write_model(tmp_path / "served-window.gguf", "lfm2", {"penalty_last_n": 32})
    unset = schema.decode_body(b'{"model": "m", "messages": []}', schema.ChatRequest)
    assert schema.sampling_spec(unset, resolve_sampling(model)).repeat_last_n == 32  # the file's
    sent = schema.decode_body(b'{"model": "m", "messages": [], "repeat_last_n": -1}', schema.ChatRequest)
    assert schema.sampling_spec(sent, resolve_sampling(model)).repeat_last_n == -1
    bad = schema.decode_body(b'{"model": "m", "messages": [], "repeat_last_n": -2}', schema.ChatRequest)
    with pytest.raises(schema.RequestRefused) as refused:
        schema.sampling_spec(bad)
    assert refused.value.param == "repeat_last_n" and "-1 (the whole answer), 0 (off)" in str(refused.value)
