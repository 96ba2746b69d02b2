"""app.services.settings: validation rules, repairing loads, atomic saves, on real files in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import msgspec
import pytest

from app.services.paths import UserPaths
from app.services.settings import (
    NO_NPU_MESSAGE,
    Settings,
    SettingsError,
    data_dir,
    load_settings,
    sampling_spec,
    save_settings,
    settings_path,
    snapshot_budget_bytes,
    validate_settings,
)
from engine.protocol import MAX_DRAFT, SamplingSpec


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "draft.gguf"
    path.write_bytes(b"GGUF")
    return path


def write_json(config: Path, document) -> Path:
    config.mkdir(parents=True, exist_ok=True)
    path = settings_path(config)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# --- load / save --------------------------------------------------------------------------------


def test_round_trip_keeps_every_field(tmp_path, gguf):
    config = tmp_path / "config"
    chosen = Settings(
        model=str(gguf), temperature=0.2, top_k=0, top_p=0.5, min_p=0.0, seed=1234, max_tokens=99,
        draft=f"model:{gguf}", draft_max=8, draft_paths=3, device_policy="cpu", snapshot_budget_gib=0.5,
        data_folder=str(tmp_path / "new-data"), highlight_drafts=True, system_prompt="Answer like a pirate.\nBe brief.",
        repeat_penalty=1.15, text_size=130, theme="dark",
    )  # fmt: skip
    save_settings(chosen, config)
    loaded = load_settings(config)
    assert loaded.settings == chosen
    assert loaded.problems == []


def test_missing_file_gives_defaults_without_problems(tmp_path):
    loaded = load_settings(tmp_path / "nowhere")
    assert loaded.settings == Settings()
    assert loaded.problems == []


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe\x00"])
def test_unreadable_file_is_moved_aside_with_its_bytes(tmp_path, content):
    path = settings_path(tmp_path)
    path.write_bytes(content)
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings()
    broken = tmp_path / "settings.json.broken"
    assert broken.read_bytes() == content
    assert not path.exists()
    assert len(loaded.problems) == 1 and str(broken) in loaded.problems[0]


def test_second_broken_file_does_not_overwrite_the_first(tmp_path):
    (tmp_path / "settings.json.broken").write_bytes(b"first")
    settings_path(tmp_path).write_bytes(b"second")
    load_settings(tmp_path)
    assert (tmp_path / "settings.json.broken").read_bytes() == b"first"
    assert (tmp_path / "settings.json.broken.1").read_bytes() == b"second"


def test_wrong_typed_field_is_reset_and_named(tmp_path):
    write_json(tmp_path, {"temperature": "hot", "top_k": 5})
    loaded = load_settings(tmp_path)
    assert loaded.settings.temperature == Settings().temperature
    assert loaded.settings.top_k == 5
    assert len(loaded.problems) == 1 and "temperature" in loaded.problems[0]


def test_invalid_value_is_reset_and_named(tmp_path):
    write_json(tmp_path, {"max_tokens": 0, "seed": 7})
    loaded = load_settings(tmp_path)
    assert loaded.settings.max_tokens == Settings().max_tokens
    assert loaded.settings.seed == 7
    assert len(loaded.problems) == 1 and "max_tokens" in loaded.problems[0]


def test_saved_npu_choice_is_reset_when_no_npu_is_present(tmp_path):
    write_json(tmp_path, {"device_policy": "npu"})
    assert load_settings(tmp_path, npu_available=True).settings.device_policy == "npu"
    without = load_settings(tmp_path, npu_available=False)
    assert without.settings.device_policy == "auto"
    assert NO_NPU_MESSAGE in without.problems[0]


def test_unknown_keys_are_ignored(tmp_path):
    write_json(tmp_path, {"top_k": 3, "future_option": {"x": 1}})
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings(top_k=3)
    assert loaded.problems == []


def test_newer_schema_keeps_known_keys_and_says_so(tmp_path):
    write_json(tmp_path, {"schema_version": 99, "top_k": 3})
    loaded = load_settings(tmp_path)
    assert loaded.settings.top_k == 3
    assert len(loaded.problems) == 1 and "newer" in loaded.problems[0]


def test_save_refuses_invalid_settings_and_keeps_the_old_file(tmp_path):
    save_settings(Settings(top_k=3), tmp_path)
    before = settings_path(tmp_path).read_bytes()
    with pytest.raises(SettingsError, match="Max tokens"):
        save_settings(Settings(max_tokens=0), tmp_path)
    assert settings_path(tmp_path).read_bytes() == before


def test_save_creates_the_folder_and_leaves_no_temporary_files(tmp_path):
    config = tmp_path / "a" / "b"
    save_settings(Settings(), config)
    assert [p.name for p in config.iterdir()] == ["settings.json"]
    assert msgspec.json.decode(settings_path(config).read_bytes(), type=Settings) == Settings()


def test_save_where_the_folder_is_a_file_raises_settings_error(tmp_path):
    blocker = tmp_path / "config"
    blocker.write_bytes(b"not a folder")
    with pytest.raises(SettingsError, match="Could not save settings to .*check the folder's permissions"):
        save_settings(Settings(), blocker / "inner")
    assert blocker.read_bytes() == b"not a folder"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores file permissions")
def test_save_into_read_only_folder_keeps_the_old_file(tmp_path):
    save_settings(Settings(top_k=3), tmp_path)
    before = settings_path(tmp_path).read_bytes()
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(SettingsError, match="Could not save settings"):
            save_settings(Settings(top_k=4), tmp_path)
    finally:
        tmp_path.chmod(0o700)
    assert settings_path(tmp_path).read_bytes() == before


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs POSIX file size limits")
def test_save_on_a_full_disk_keeps_the_old_file(tmp_path):
    import resource

    save_settings(Settings(top_k=3), tmp_path)
    before = settings_path(tmp_path).read_bytes()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, limits[1]))
    try:
        with pytest.raises(SettingsError, match="Could not save settings"):
            save_settings(Settings(top_k=4), tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert settings_path(tmp_path).read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


# --- validation rules: one failing and one passing case each -----------------------------------


def test_defaults_are_valid():
    assert validate_settings(Settings()) == {}


@pytest.mark.parametrize(
    "name, bad, good",
    [
        ("temperature", -0.1, 0.0),
        ("temperature", float("nan"), 2.0),
        ("top_k", -1, 0),
        ("top_p", 0.0, 1.0),
        ("min_p", 1.0, 0.0),
        ("seed", -1, 0),
        ("max_tokens", 0, 1),
        ("max_tokens", 32769, 32768),
        ("draft", "fast", "lookup"),
        ("draft_max", 0, 1),
        ("draft_max", MAX_DRAFT + 1, MAX_DRAFT),
        ("draft_paths", 0, 1),
        ("draft_paths", 5, 4),
        ("device_policy", "gpu", "cpu"),
        ("snapshot_budget_gib", 0.05, 0.1),
        ("snapshot_budget_gib", 1025.0, 1024.0),
        ("data_folder", "relative/folder", ""),
        ("model", "missing.gguf", "default"),
        ("repeat_penalty", 0.9, 1.0),
        ("repeat_penalty", 2.1, 2.0),
        ("repeat_penalty", float("nan"), 1.3),
        ("text_size", 79, 80),
        ("text_size", 201, 200),
        ("theme", "blue", "light"),
        ("theme", "System", "dark"),
    ],
)
def test_each_rule_names_only_its_field(name, bad, good):
    errors = validate_settings(Settings(**{name: bad}))
    assert list(errors) == [name]
    assert errors[name].endswith(".") and errors[name][0].isupper()
    assert validate_settings(Settings(**{name: good})) == {}


def test_draft_model_must_be_an_existing_gguf(tmp_path, gguf):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert "draft" in validate_settings(Settings(draft="model:"))
    assert "draft" in validate_settings(Settings(draft=f"model:{tmp_path / 'absent.gguf'}"))
    assert ".gguf" in validate_settings(Settings(draft=f"model:{other}"))["draft"]
    assert validate_settings(Settings(draft=f"model:{gguf}")) == {}


def test_model_must_be_default_or_an_existing_gguf(tmp_path, gguf):
    assert "model" in validate_settings(Settings(model=str(tmp_path)))
    assert validate_settings(Settings(model=str(gguf))) == {}


def test_npu_only_when_present():
    assert validate_settings(Settings(device_policy="npu")) == {"device_policy": NO_NPU_MESSAGE}
    assert validate_settings(Settings(device_policy="npu"), npu_available=True) == {}


def test_data_folder_existing_or_creatable(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "not a folder" in validate_settings(Settings(data_folder=str(a_file)))["data_folder"]
    assert "data_folder" in validate_settings(Settings(data_folder=str(a_file / "below")))
    assert validate_settings(Settings(data_folder=str(tmp_path))) == {}
    assert validate_settings(Settings(data_folder=str(tmp_path / "new" / "deeper"))) == {}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores file permissions")
def test_data_folder_must_be_writable(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert "data_folder" in validate_settings(Settings(data_folder=str(locked / "new")))
    finally:
        locked.chmod(0o700)


# --- helpers ------------------------------------------------------------------------------------


def test_helpers_translate_settings():
    s = Settings(temperature=0.3, top_k=5, top_p=0.9, min_p=0.1, seed=8, snapshot_budget_gib=1.5, repeat_penalty=1.2)
    assert sampling_spec(s) == SamplingSpec(temperature=0.3, top_k=5, top_p=0.9, min_p=0.1, seed=8, repeat_penalty=1.2)
    assert snapshot_budget_bytes(s) == 1536 * 1024**2


def test_data_dir_prefers_the_chosen_folder(tmp_path):
    paths = UserPaths(data=tmp_path / "d", config=tmp_path / "c", cache=tmp_path / "k")
    assert data_dir(Settings(), paths) == tmp_path / "d"
    assert data_dir(Settings(data_folder=str(tmp_path / "mine")), paths) == tmp_path / "mine"


def test_a_saved_theme_or_text_size_out_of_range_is_reset_and_named(tmp_path):
    write_json(tmp_path, {"theme": "neon", "text_size": 500, "system_prompt": "Be kind.", "repeat_penalty": 3.0})
    loaded = load_settings(tmp_path)
    assert (loaded.settings.theme, loaded.settings.text_size) == ("system", 100)
    assert loaded.settings.repeat_penalty is None and loaded.settings.system_prompt == "Be kind."
    assert len(loaded.problems) == 3 and any("text_size" in problem for problem in loaded.problems)
