"""Settings → Engines as real widgets on a real registry (the test's config folder) and a real
keyring backend on a file of the test's (or none at all), and the words the window uses for
remote engines."""

from __future__ import annotations

import json
import stat

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.services.engines import EngineEntry, EngineRegistry
from app.services.settings import Settings
from app.engine_clients.remote.probe import ProbeResult
from tests.helpers.memory_keyring import FILE_ENV, FileKeyring
from tests.helpers.remote_gui import secret_store
from ui.remote_text import answered_by_line, marker_text, probe_text
from ui.views.engine_form import FROM_SERVER, EngineForm
from ui.views.engines_dialog import LOCAL_MODEL, EnginesDialog
from ui.views.settings_dialog import SettingsDialog


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    """A secret store whose contents the test can read: a JSON file."""
    path = tmp_path / "secrets.json"
    monkeypatch.setenv(FILE_ENV, str(path))
    with secret_store(FileKeyring()):
        yield path


@pytest.fixture
def no_secret_store():
    with secret_store(None):
        yield


@pytest.fixture
def dialog(qtbot) -> EnginesDialog:
    shown = EnginesDialog(EngineRegistry())
    qtbot.addWidget(shown)
    shown.show()
    return shown


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def press_ok(qtbot, form: EngineForm) -> None:
    click(qtbot, form.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok))


def fill(form: EngineForm, name: str, url: str, key: str = "", model: str = "") -> None:
    form.name.setText(name)
    form.url.setText(url)
    form.key.setText(key)
    form.model.setEditText(model)


def test_an_engine_is_added_edited_and_removed_with_its_key_in_the_secret_store(qtbot, dialog, secrets,
                                                                                hearth_home):
    assert dialog.rows() == [("This computer", "—", LOCAL_MODEL)]
    assert not dialog.edit_button.isEnabled() and not dialog.remove_button.isEnabled(), "this computer stays"

    click(qtbot, dialog.add_button)
    form = dialog.form
    assert form.isVisible() and form.key.echoMode() == form.key.EchoMode.Password
    assert "secret store" in form.key_place.text() and not form.key_in_file.isVisible()
    assert form.context.value() == 4096, "a context the user fills, 4096 unless told"
    fill(form, "gpu", "http://127.0.0.1:8000", key="sk-secret-1", model="llama-70b")
    form.context.setValue(8192)
    assert form.url_note.isVisible() and "plain http://" in form.url_note.text(), "a private http address warns"
    press_ok(qtbot, form)

    registry = EngineRegistry()
    assert registry.get("gpu") == EngineEntry("gpu", "http://127.0.0.1:8000/v1", "llama-70b", 8192, "keyring")
    assert "sk-secret-1" in secrets.read_text()
    assert "sk-secret-1" not in (hearth_home / "config" / "engines.json").read_text()
    assert dialog.rows()[1] == ("gpu", "http://127.0.0.1:8000/v1", "llama-70b")
    assert "secret store" in dialog.status.text() and "sk-secret-1" not in dialog.status.text()

    form = dialog.edit()  # the engine just saved is the one selected
    assert form.name.text() == "gpu" and form.name.isReadOnly() and form.key.text() == ""
    assert form.model.currentText() == "llama-70b" and form.context.value() == 8192
    form.model.setEditText("llama-8b")
    press_ok(qtbot, form)
    assert registry.get("gpu").model == "llama-8b" and dialog.rows()[1][2] == "llama-8b"
    assert registry.remote_engine("gpu").api_key == "sk-secret-1", "an empty key field keeps the key"

    click(qtbot, dialog.remove_button)
    assert registry.entries() == [] and dialog.rows() == [("This computer", "—", LOCAL_MODEL)]
    assert "sk-secret-1" not in secrets.read_text() and "Removed gpu" in dialog.status.text()


def test_a_changed_signal_follows_each_change_of_the_list(qtbot, dialog, secrets):
    changes = []
    dialog.engines_changed.connect(lambda: changes.append(dialog.names()))
    form = dialog.add()
    fill(form, "box", "https://box.example.com")
    press_ok(qtbot, form)
    dialog.select("box")
    click(qtbot, dialog.remove_button)
    assert changes == [["box"], []]


def test_plain_http_over_the_internet_is_refused_with_the_reason_and_nothing_is_saved(qtbot, dialog, secrets):
    form = dialog.add()
    fill(form, "far", "http://8.8.8.8:8000/v1", key="sk-x")
    assert form.url_note.isVisible() and "use https://" in form.url_note.text()
    press_ok(qtbot, form)
    assert form.isVisible() and EngineRegistry().entries() == [], "the form stays open"
    form.url.setText("https://8.8.8.8:8000/v1")
    assert not form.url_note.isVisible()
    press_ok(qtbot, form)
    assert not form.isVisible() and dialog.names() == ["far"]


def test_a_bad_name_or_one_taken_is_said_in_the_form(qtbot, dialog, secrets):
    form = dialog.add()
    fill(form, "my engine", "https://a.example.com")
    press_ok(qtbot, form)
    assert form.isVisible() and "letters, digits" in form.error.text()
    form.name.setText("a")
    press_ok(qtbot, form)
    again = dialog.add()
    fill(again, "A", "https://b.example.com")
    press_ok(qtbot, again)
    assert again.isVisible() and "already an engine called A" in again.error.text()
    assert EngineRegistry().get("a").url == "https://a.example.com/v1", "the first one is untouched"


def test_without_a_secret_store_the_key_is_for_the_session_unless_a_private_file_is_allowed(
        qtbot, dialog, no_secret_store, hearth_home):
    form = dialog.add()
    assert "No secret store" in form.key_place.text() and "until Hearth quits" in form.key_place.text()
    assert form.key_in_file.isVisible() and not form.key_in_file.isChecked()
    fill(form, "session", "https://a.example.com", key="sk-session")
    press_ok(qtbot, form)
    assert "only until Hearth quits" in dialog.status.text()

    form = dialog.add()
    fill(form, "filed", "https://b.example.com", key="sk-filed")
    form.key_in_file.setChecked(True)
    press_ok(qtbot, form)
    registry = EngineRegistry()
    assert [(e.name, e.key_kind) for e in registry.entries()] == [("session", "session"), ("filed", "file")]
    key_file = hearth_home / "config" / "engine_keys.json"
    assert json.loads(key_file.read_text()) == {"filed": "sk-filed"}
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert registry.remote_engine("session").api_key == "sk-session"

    form = dialog.edit()  # "filed", selected after saving
    assert form.key_in_file.isChecked() and form.key.placeholderText().startswith("(unchanged")
    press_ok(qtbot, form)
    registry = EngineRegistry()
    assert registry.remote_engine("filed").api_key == "sk-filed" and registry.get("filed").key_kind == "file"


def test_a_context_of_zero_reads_from_the_server(qtbot, dialog, secrets):
    EngineRegistry().add(EngineEntry("cli", "https://c.example.com/v1"))  # as `hearth engines add` saves it
    dialog.refresh(select="cli")
    form = dialog.edit()
    assert form.context.value() == 0 and form.context.text() == FROM_SERVER
    assert dialog.rows()[1] == ("cli", "https://c.example.com/v1", "its first model")


def test_an_unreachable_engine_says_so_in_the_form_and_in_the_list(qtbot, dialog, secrets):
    form = dialog.add()
    fill(form, "gone", "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    click(qtbot, form.fetch)
    qtbot.waitUntil(lambda: form.fetch.isEnabled(), timeout=30_000)
    assert "cannot reach the engine" in form.context_note.text().lower()
    click(qtbot, form.test)
    qtbot.waitUntil(lambda: form.test.isEnabled(), timeout=30_000)
    assert form.test_result.text().startswith("Cannot reach the engine gone")
    press_ok(qtbot, form)
    click(qtbot, dialog.test_button)
    qtbot.waitUntil(lambda: dialog.test_button.isEnabled(), timeout=30_000)
    assert dialog.status.text().startswith("gone: Cannot reach the engine gone")


def test_the_settings_dialog_opens_the_engines(qtbot):
    settings = SettingsDialog(Settings())
    qtbot.addWidget(settings)
    settings.show()
    with qtbot.waitSignal(settings.engines_requested, timeout=1000):
        click(qtbot, settings.engines_button)


def test_what_the_window_says_about_remote_engines():
    assert marker_text([]) == ""
    assert marker_text(["gpu"]) == "answered on gpu: messages leave this computer"
    assert marker_text(["a", "b", "c"]) == "answered on a, b and c: messages leave this computer"
    assert answered_by_line({"model": "SmolLM2"}) == "this computer · SmolLM2"
    assert answered_by_line({"engine": "local", "model": "SmolLM2"}) == "this computer · SmolLM2"
    assert answered_by_line({"engine": "gpu", "model": "llama", "remote": {"cached_tokens": None}}) == "gpu · llama"
    assert answered_by_line({"engine": "gpu", "model": "llama", "remote": {"cached_tokens": 1234}}) == (
        "gpu · llama\n1,234 prompt tokens reused from the server's cache")
    assert answered_by_line({}) == answered_by_line(None) == answered_by_line({"engine": 3}) == ""
    works = ProbeResult(ok=True, latency_ms=85.4, models=["a", "b"], tok_s=41.25, warning="plain http is used")
    assert probe_text(works) == "Works: 85 ms to list the models, 41.2 tok/s, 2 models. Plain http is used."
    assert probe_text(ProbeResult(ok=False, error="the engine gpu refused the API key")) == (
        "The engine gpu refused the API key.")
