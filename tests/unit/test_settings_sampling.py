"""Sampling in the settings follows the model unless the user set it (issue 51, point 1): a
settings.json from schema 1 (every value written, the old shipped defaults among them) is migrated,
a new file keeps only what the user set, and the values an answer uses are the user's over the
model's. Real files in tmp_path, real GGUF files (tests/unit/test_sampling_defaults.py)."""

from __future__ import annotations

import json

from app.services.settings import (
    SCHEMA_VERSION, Settings, load_settings, resolved_sampling, sampling_spec, save_settings, settings_path,
)
from engine.protocol import DEFAULTS, SamplingSpec
from tests.unit.test_sampling_defaults import write_model

# What Hearth 0.x (schema 1) wrote for a user who never touched sampling: its shipped values of the day.
OLD_UNTOUCHED = {"schema_version": 1, "model": "default", "temperature": 0.7, "top_k": 40, "top_p": 0.95,
                 "min_p": 0.05, "seed": None, "max_tokens": 1024, "repeat_penalty": 1.0, "theme": "dark"}


def write_old(config, **changes) -> None:
    config.mkdir(parents=True, exist_ok=True)
    settings_path(config).write_text(json.dumps({**OLD_UNTOUCHED, **changes}), encoding="utf-8")


def test_an_old_file_with_the_shipped_values_follows_the_model_so_the_penalty_is_on(tmp_path):
    write_old(tmp_path)
    loaded = load_settings(tmp_path)
    assert loaded.problems == []
    s = loaded.settings
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty) == (None,) * 5
    assert s.theme == "dark" and s.schema_version == SCHEMA_VERSION  # the rest is kept
    assert sampling_spec(s).repeat_penalty == DEFAULTS.sampling.repeat_penalty == 1.1  # no more loops


def test_an_old_file_keeps_the_values_the_user_changed(tmp_path):
    write_old(tmp_path, temperature=0.2, repeat_penalty=1.3, top_k=40)
    s = load_settings(tmp_path).settings
    assert (s.temperature, s.repeat_penalty, s.top_k) == (0.2, 1.3, None)


def test_a_new_file_keeps_only_what_the_user_set_and_reads_back_the_same(tmp_path):
    save_settings(Settings(temperature=0.7, repeat_penalty=1.0), tmp_path)  # set by the user: kept, even 1.0
    saved = json.loads(settings_path(tmp_path).read_text())
    assert saved["schema_version"] == 2
    assert (saved["temperature"], saved["repeat_penalty"]) == (0.7, 1.0)
    assert not {"top_k", "top_p", "min_p"} & saved.keys()
    s = load_settings(tmp_path).settings
    assert (s.temperature, s.repeat_penalty, s.top_k) == (0.7, 1.0, None)


def test_an_answer_samples_with_the_users_values_over_the_models(tmp_path):
    model = write_model(tmp_path / "mine.gguf", "llama", {"temp": 0.3, "top_k": 12, "penalty_repeat": 1.2})
    s = Settings(model=str(model), temperature=0.9, seed=7)
    resolved = resolved_sampling(s)
    assert [resolved.label(name) for name in ("temperature", "top_k", "repeat_penalty", "top_p")] == [
        "yours", "from the model", "from the model", "Hearth's default"]
    spec = sampling_spec(s)
    assert (spec.temperature, spec.top_k, spec.seed) == (0.9, 12, 7)
    assert abs(spec.repeat_penalty - 1.2) < 1e-6


def test_settings_nobody_touched_sample_with_the_models_defaults():
    assert sampling_spec(Settings()) == SamplingSpec(**{**{f: getattr(DEFAULTS.sampling, f) for f in
                                                          ("temperature", "top_k", "top_p", "min_p", "repeat_penalty")}})
