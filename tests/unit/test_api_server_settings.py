"""The local API server's settings: kept across saves, checked field by field, written privately."""

from __future__ import annotations

import json
import os
import stat

import pytest

from app.services.settings import (
    Settings,
    SettingsError,
    load_settings,
    save_settings,
    settings_path,
    validate_settings,
)

KEY = "k3y_-Generated0123456789abcdef"


def test_defaults_are_off_on_port_8089_without_a_key_and_only_this_computer():
    s = Settings()
    assert (s.api_server, s.api_server_port, s.api_server_key, s.api_server_lan) == (False, 8089, "", False)


def test_round_trip_keeps_the_api_server_fields(tmp_path):
    chosen = Settings(api_server=True, api_server_port=9123, api_server_key=KEY, api_server_lan=True)
    save_settings(chosen, tmp_path)
    loaded = load_settings(tmp_path)
    assert loaded.settings == chosen
    assert loaded.problems == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_the_settings_file_holding_a_key_is_private(tmp_path):
    save_settings(Settings(api_server_key=KEY), tmp_path)
    assert stat.S_IMODE(settings_path(tmp_path).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "name, bad, good",
    [
        ("api_server_port", 80, 1024),
        ("api_server_port", 65536, 65535),
        ("api_server_key", "has space", "no-space"),
        ("api_server_key", "clé", "cle"),
    ],
)
def test_each_api_rule_names_only_its_field(name, bad, good):
    errors = validate_settings(Settings(**{name: bad}))
    assert list(errors) == [name]
    assert errors[name].endswith(".") and errors[name][0].isupper()
    assert validate_settings(Settings(**{name: good})) == {}


def test_the_port_message_gives_the_range_and_the_value():
    assert validate_settings(Settings(api_server_port=80)) == {
        "api_server_port": "The API server's port must be between 1024 and 65535, got 80."
    }


def test_other_devices_need_a_usable_key():
    assert "needs a key" in validate_settings(Settings(api_server_lan=True))["api_server_lan"]
    assert set(validate_settings(Settings(api_server_lan=True, api_server_key="bad key"))) == {
        "api_server_key", "api_server_lan"}
    assert validate_settings(Settings(api_server_lan=True, api_server_key=KEY)) == {}


def test_a_bad_port_is_refused_on_save_and_keeps_the_old_file(tmp_path):
    save_settings(Settings(api_server_port=9000), tmp_path)
    before = settings_path(tmp_path).read_bytes()
    with pytest.raises(SettingsError, match="port must be between 1024 and 65535"):
        save_settings(Settings(api_server_port=99999), tmp_path)
    assert settings_path(tmp_path).read_bytes() == before


def test_a_saved_bad_port_is_reset_alone_and_named(tmp_path):
    settings_path(tmp_path).write_text(json.dumps({"api_server": True, "api_server_port": 22}), encoding="utf-8")
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings(api_server=True)
    assert len(loaded.problems) == 1 and "api_server_port" in loaded.problems[0]


def test_a_saved_network_choice_without_a_key_is_turned_off(tmp_path):
    settings_path(tmp_path).write_text(json.dumps({"api_server": True, "api_server_lan": True}), encoding="utf-8")
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings(api_server=True, api_server_lan=False)
    assert len(loaded.problems) == 1 and "api_server_lan" in loaded.problems[0]
