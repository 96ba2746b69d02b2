"""The registry of remote engines (app.services.engines): engines.json, and API keys kept in the
system's secret store (a real keyring backend on a file), else for the session, in a 0600 file
with consent, or read from an environment variable. A key never lands in engines.json."""

from __future__ import annotations

import stat

import keyring
import keyring.backends.fail
import keyring.errors
import pytest

from app.services import engine_keys
from app.services.engines import EngineEntry, EngineNotFound, EngineProblem, EngineRegistry, entry_json, secret_store
from tests.helpers.memory_keyring import FILE_ENV, FileKeyring

KEY = "sk-test-0123456789"


@pytest.fixture
def use_keyring():
    """Select a keyring backend for the test, and put the previous one back after it."""
    previous = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(previous)


@pytest.fixture
def store(use_keyring, tmp_path, monkeypatch) -> FileKeyring:
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "secrets.json"))
    backend = FileKeyring()
    use_keyring(backend)
    return backend


@pytest.fixture
def no_store(use_keyring):
    use_keyring(keyring.backends.fail.Keyring())


class RefusingKeyring(FileKeyring):
    """A secret store that is there but refuses to keep anything (a locked keychain, say)."""

    def set_password(self, service, username, password):
        raise keyring.errors.PasswordSetError("the keychain is locked")


@pytest.fixture
def registry(tmp_path) -> EngineRegistry:
    return EngineRegistry(tmp_path / "config")


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_registry_lives_next_to_the_settings(hearth_home):
    assert EngineRegistry().path == hearth_home / "config" / "engines.json"


def test_a_key_goes_to_the_secret_store_and_never_into_the_file(store, registry):
    said = registry.add(EngineEntry("gpu", "http://127.0.0.1:8000", model="llama"), KEY)
    assert "secret store" in said and "FileKeyring" in said
    assert store.secrets() == {"hearth/engine:gpu": KEY}
    assert KEY not in registry.path.read_text() and mode(registry.path) == 0o600
    assert registry.get("GPU") == EngineEntry("gpu", "http://127.0.0.1:8000/v1", "llama", 0, "keyring", "")
    engine = registry.remote_engine("gpu")
    assert (engine.url, engine.model, engine.api_key) == ("http://127.0.0.1:8000/v1", "llama", KEY)
    assert entry_json(registry.get("gpu"))["key"] == "keyring" and KEY not in str(entry_json(registry.get("gpu")))


def test_removing_an_engine_deletes_its_key(store, registry):
    registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY)
    registry.add(EngineEntry("other", "https://example.com/v1"), "sk-other")
    registry.remove("gpu")
    assert [e.name for e in registry.entries()] == ["other"]
    assert store.secrets() == {"hearth/engine:other": "sk-other"}
    with pytest.raises(EngineNotFound, match="hearth engines list"):
        registry.remove("gpu")


def test_an_unknown_engine_is_named_with_where_to_look(registry):
    with pytest.raises(EngineNotFound, match=r"no remote engine called 'nope'.*`hearth engines list`"):
        registry.remote_engine("nope")


def test_a_second_engine_of_the_same_name_is_refused_unless_replacing(store, registry):
    registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY)
    with pytest.raises(EngineProblem, match="already an engine called gpu.*--replace"):
        registry.add(EngineEntry("GPU", "http://127.0.0.1:9000"), "sk-new")
    assert registry.remote_engine("gpu").api_key == KEY
    registry.add(EngineEntry("gpu", "http://127.0.0.1:9000", context=8192), "sk-new", replace=True)
    assert [(e.url, e.context) for e in registry.entries()] == [("http://127.0.0.1:9000/v1", 8192)]
    assert registry.remote_engine("gpu").api_key == "sk-new"
    registry.add(EngineEntry("gpu", "http://127.0.0.1:9000"), None, replace=True)
    assert registry.get("gpu").key_kind == "none" and store.secrets() == {}
    assert registry.remote_engine("gpu").api_key == ""


@pytest.mark.parametrize("entry, key, words", [
    (EngineEntry("gpu", "http://8.8.8.8:8000/v1"), None, "use https://"),
    (EngineEntry("gpu", "ftp://127.0.0.1/v1"), None, "not a web address"),
    (EngineEntry("local", "http://127.0.0.1:8000"), None, "this computer's own engine"),
    (EngineEntry("bad name", "http://127.0.0.1:8000"), None, "an engine's name is"),
    (EngineEntry("gpu", "http://127.0.0.1:8000", context=-1), None, "a context is 0"),
    (EngineEntry("gpu", "http://127.0.0.1:8000"), "two words", "without spaces"),
    (EngineEntry("gpu", "http://127.0.0.1:8000"), "", "the API key is empty"),
])
def test_what_cannot_be_used_is_refused_with_a_reason(store, registry, entry, key, words):
    with pytest.raises(EngineProblem, match=words):
        registry.add(entry, key)
    assert registry.entries() == [] and not registry.path.exists() and store.secrets() == {}


def test_the_secret_store_is_named_or_its_absence_explained(use_keyring, tmp_path, monkeypatch):
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "secrets.json"))
    use_keyring(FileKeyring())
    assert secret_store() == (True, FileKeyring.name)
    use_keyring(keyring.backends.fail.Keyring())
    usable, why = secret_store()
    assert not usable and "no secret store" in why


def test_without_a_secret_store_a_key_is_kept_for_the_session_only(no_store, registry, monkeypatch):
    said = registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY)
    assert said.startswith("No secret store") and "only until Hearth quits" in said
    assert registry.get("gpu").key_kind == "session" and KEY not in registry.path.read_text()
    assert not (registry.config_dir / "engine_keys.json").exists()
    assert EngineRegistry(registry.config_dir).remote_engine("gpu").api_key == KEY  # the same process
    monkeypatch.setattr(engine_keys, "_session_keys", {})  # as in the next run of Hearth
    with pytest.raises(EngineProblem, match="kept only until Hearth quit.*add the engine again"):
        registry.remote_engine("gpu")


def test_without_a_secret_store_a_key_goes_to_a_private_file_when_allowed(no_store, registry):
    said = registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY, key_in_file=True)
    key_file = registry.config_dir / "engine_keys.json"
    assert str(key_file) in said and "readable only by you" in said
    assert mode(key_file) == 0o600 and mode(registry.config_dir) == 0o700
    assert registry.get("gpu").key_kind == "file" and KEY not in registry.path.read_text()
    assert EngineRegistry(registry.config_dir).remote_engine("gpu").api_key == KEY
    registry.remove("gpu")
    assert KEY not in key_file.read_text()


def test_without_a_secret_store_a_key_from_a_variable_is_read_from_it_each_time(no_store, registry, monkeypatch):
    said = registry.add(EngineEntry("gpu", "http://127.0.0.1:8000", key_env="GPU_KEY"), KEY)
    assert "environment variable GPU_KEY" in said
    assert (registry.get("gpu").key_kind, registry.get("gpu").key_env) == ("env", "GPU_KEY")
    assert entry_json(registry.get("gpu"))["key"] == "env:GPU_KEY"
    monkeypatch.setenv("GPU_KEY", "sk-from-the-variable")
    assert registry.remote_engine("gpu").api_key == "sk-from-the-variable"
    monkeypatch.delenv("GPU_KEY")
    with pytest.raises(EngineProblem, match="environment variable GPU_KEY, which is not set"):
        registry.remote_engine("gpu")


def test_a_secret_store_that_refuses_the_key_is_said_and_the_next_place_used(use_keyring, registry, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "secrets.json"))
    use_keyring(RefusingKeyring())
    said = registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY, key_in_file=True)
    assert said.startswith("The system's secret store refused the key (the keychain is locked)")
    assert registry.get("gpu").key_kind == "file" and registry.remote_engine("gpu").api_key == KEY


def test_a_key_gone_from_the_secret_store_says_to_add_the_engine_again(store, registry):
    registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"), KEY)
    store.delete_password("hearth", "engine:gpu")
    with pytest.raises(EngineProblem, match="no longer in the system's secret store; add the engine again"):
        registry.remote_engine("gpu")


def test_a_broken_file_is_set_aside_with_a_message_and_never_lost(registry):
    registry.config_dir.mkdir(parents=True)
    registry.path.write_text('{"engines": [{"name": "gpu"')
    again = EngineRegistry(registry.config_dir)
    assert again.entries() == []
    broken = registry.config_dir / "engines.json.broken"
    assert broken.read_text() == '{"engines": [{"name": "gpu"'
    [message] = again.problems
    assert str(registry.path) in message and str(broken) in message and "hearth engines add" in message
    again.add(EngineEntry("gpu", "http://127.0.0.1:8000"))
    assert [e.name for e in again.entries()] == ["gpu"] and broken.exists()


@pytest.mark.parametrize("text", [
    '[]',
    '{"engines": [{"name": "gpu", "url": "http://127.0.0.1/v1", "key_kind": "paper"}]}',
    '{"engines": [{"name": "a", "url": "http://127.0.0.1/v1"}, {"name": "A", "url": "http://127.0.0.1/v1"}]}',
])
def test_a_file_that_is_not_a_list_of_engines_is_set_aside(registry, text):
    registry.config_dir.mkdir(parents=True)
    registry.path.write_text(text)
    assert EngineRegistry(registry.config_dir).entries() == []
    assert (registry.config_dir / "engines.json.broken").read_text() == text


def test_an_address_edited_to_a_public_http_one_is_refused_when_used(registry):
    registry.add(EngineEntry("gpu", "http://127.0.0.1:8000"))
    registry.path.write_text(registry.path.read_text().replace("127.0.0.1:8000", "8.8.8.8"))
    with pytest.raises(EngineProblem, match="engine gpu: 8.8.8.8 is not on this computer"):
        registry.remote_engine("gpu")
