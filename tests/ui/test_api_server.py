"""The local API server run by the app: the real window, the real ``hearth serve`` child on SmolLM2,
the official ``openai`` client talking to it; the settings group driven through its widgets."""

from __future__ import annotations

import socket
import string

import openai
import psutil
import pytest
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QLineEdit

from app.services.settings import Settings
from tests.helpers.gui import write_settings
from ui.api_server import KEY_ENV, ServerPlan, _environment, failure_text
from ui.views.settings_dialog import SettingsDialog

SERVER_START_MS = 180_000  # a cold start loads the model in the server's own worker


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def press_ok(dialog: SettingsDialog) -> None:
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()


def error_text(dialog: SettingsDialog, field: str) -> str | None:
    label = dialog.findChild(QLabel, f"error_{field}")
    return label.text() if label.isVisible() else None


def turn_on_in_the_dialog(window, port: int, *, generate_key: bool = False) -> str:
    """Open Settings, switch the server on at ``port`` (with a new key if asked), press OK; the key."""
    window.open_settings()
    dialog = window.settings_dialog
    group = dialog.api_group
    group.api_server.setChecked(True)
    group.api_server_port.setValue(port)
    if generate_key:
        group.key_generate.click()
    key = group.api_server_key.text()
    press_ok(dialog)
    assert not dialog.isVisible(), dialog.form_errors()
    return key


def ask(url: str, key: str):
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)
    return client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Say hello."}],
                                          max_tokens=8, temperature=0)


@pytest.fixture
def open_dialog(qtbot):
    def open_(settings: Settings = Settings()) -> SettingsDialog:
        dialog = SettingsDialog(settings)
        qtbot.addWidget(dialog)
        dialog.show()
        return dialog

    return open_


# --- the real server ----------------------------------------------------------------------------


def test_turning_it_on_serves_the_api_counts_requests_restarts_on_a_new_port_and_quitting_stops_it(start_app):
    write_settings(draft="off")
    app = start_app()
    window, port = app.window, free_port()
    assert not window.api_status.isVisible() and window.api_server.pid() is None

    key = turn_on_in_the_dialog(window, port, generate_key=True)
    app.wait(lambda: window.api_status.isVisible(), SERVER_START_MS)
    url = f"http://127.0.0.1:{port}/v1"
    assert window.api_status.text() == f"API {url} · 0 requests"
    server = psutil.Process(window.api_server.pid())
    assert key not in " ".join(server.cmdline()), "the key never goes on the command line"
    assert server.environ()[KEY_ENV] == key

    reply = ask(url, key)
    assert reply.choices[0].message.content and reply.usage.completion_tokens > 0
    app.wait(lambda: window.api_status.text() == f"API {url} · 1 request")
    with pytest.raises(openai.AuthenticationError):
        ask(url, "wrong")
    app.wait(lambda: window.api_status.text() == f"API {url} · 2 requests")  # a refused request counts too

    old = [server, *server.children(recursive=True)]  # the server and its worker
    assert len(old) >= 2
    moved = free_port()
    turn_on_in_the_dialog(window, moved)  # a new port: the server restarts there
    app.wait(lambda: window.api_status.text() == f"API http://127.0.0.1:{moved}/v1 · 0 requests", SERVER_START_MS)
    assert psutil.wait_procs(old, timeout=30)[1] == [], "the old server and its worker ended"
    assert ask(f"http://127.0.0.1:{moved}/v1", key).choices[0].message.content

    server = psutil.Process(window.api_server.pid())
    family = [server, *server.children(recursive=True)]
    window.close()
    assert not psutil.pid_exists(server.pid), "closing the window waits for the server to end"
    assert psutil.wait_procs(family, timeout=30)[1] == []


def test_a_port_in_use_is_said_in_words_in_the_dialog_when_open_else_in_the_banner(start_app):
    write_settings(draft="off")
    app = start_app()
    window = app.window
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        in_use = f"The local API server could not start: port {port} is already in use by another program."

        turn_on_in_the_dialog(window, port)
        window.open_settings()  # open again at once: the failure comes while it is open
        dialog = window.settings_dialog
        app.wait(lambda: (error_text(dialog, "api_server") or "").startswith(in_use), SERVER_START_MS)
        assert window.banner.text() == ""
        assert not window.api_server.running and not window.api_status.isVisible()
        dialog.reject()

        window.api_server.restart(window.api_server.plan)  # the same failure with no dialog open
        app.wait(lambda: window.banner.text().startswith(in_use), SERVER_START_MS)
    text = window.banner.text()
    assert "Traceback" not in text and "--port" not in text and "hearth:" not in text
    assert text.endswith("Choose another port in Settings, or close that program.")
    assert window.banner.kind == "error"


# --- the settings group -------------------------------------------------------------------------


def test_the_group_shows_the_settings_and_hides_the_key(open_dialog):
    given = Settings(api_server=True, api_server_port=9123, api_server_key="secret-key", api_server_lan=True)
    dialog = open_dialog(given)
    group = dialog.api_group
    assert group.title() == "Local API server"
    assert group.api_server.isChecked() and group.api_server_lan.isChecked()
    assert group.api_server_port.value() == 9123
    key = group.api_server_key
    assert key.text() == "secret-key" and key.echoMode() == QLineEdit.EchoMode.Password
    group.key_shown.setChecked(True)
    assert key.echoMode() == QLineEdit.EchoMode.Normal
    assert dialog.form_settings() == given


def test_other_devices_without_a_key_are_refused_until_one_is_generated(open_dialog):
    dialog = open_dialog()
    group = dialog.api_group
    group.api_server.setChecked(True)
    group.api_server_lan.setChecked(True)
    press_ok(dialog)
    assert dialog.isVisible() and dialog.result_settings is None
    assert error_text(dialog, "api_server_lan") == ("Letting other devices connect needs a key: type one or "
                                                    "press Generate.")
    assert dialog.focusWidget() is group.api_server_lan

    group.key_generate.click()
    key = group.api_server_key.text()
    assert len(key) == 32 and set(key) <= set(string.ascii_letters + string.digits + "-_")
    assert group.api_server_key.echoMode() == QLineEdit.EchoMode.Normal, "a new key is shown, to be copied"
    group.key_generate.click()
    assert group.api_server_key.text() != key, "each press makes a new key"
    press_ok(dialog)
    assert dialog.result_settings == Settings(api_server=True, api_server_lan=True,
                                              api_server_key=group.api_server_key.text())


def test_the_address_line_follows_the_port_and_the_network_choice(open_dialog):
    dialog = open_dialog()
    group = dialog.api_group
    assert group.address.text() == "Programs on this computer use http://127.0.0.1:8089/v1."
    group.api_server_port.setValue(9999)
    assert group.address.text() == "Programs on this computer use http://127.0.0.1:9999/v1."
    group.api_server_lan.setChecked(True)
    assert "http://127.0.0.1:9999/v1; other devices use this computer's network address" in group.address.text()


def test_a_port_below_1024_gets_the_rules_message(open_dialog):
    dialog = open_dialog()
    group = dialog.api_group
    group.api_server_port.setValue(80)
    press_ok(dialog)
    assert dialog.isVisible()
    assert error_text(dialog, "api_server_port") == "The API server's port must be between 1024 and 65535, got 80."
    assert dialog.focusWidget() is group.api_server_port


# --- how the child is started -------------------------------------------------------------------


def test_the_command_line_names_port_host_and_model_but_never_the_key():
    plan = ServerPlan.from_settings(Settings(api_server=True, api_server_port=9001, api_server_key="k-123",
                                             api_server_lan=True, model="/models/x.gguf"))
    assert plan.arguments() == ["serve", "--port", "9001", "--host", "0.0.0.0", "--model", "/models/x.gguf"]
    local = ServerPlan.from_settings(Settings(api_server=True))
    assert local.arguments() == ["serve", "--port", "8089", "--host", "127.0.0.1", "--model", "default"]
    assert ServerPlan.from_settings(Settings()) is None, "off: nothing to run"


def test_the_key_is_in_the_environment_and_an_inherited_one_is_not(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "from-the-shell")
    assert _environment("k-123").value(KEY_ENV) == "k-123"
    assert not _environment("").contains(KEY_ENV)


def test_a_settings_change_the_server_does_not_use_needs_no_restart():
    on = Settings(api_server=True)
    assert ServerPlan.from_settings(on) == ServerPlan.from_settings(Settings(api_server=True, highlight_drafts=True))
    assert ServerPlan.from_settings(on) != ServerPlan.from_settings(Settings(api_server=True, kv_cache_8bit=True))


@pytest.mark.parametrize("line, was_listening, expected", [
    ("hearth: error: cannot listen on 127.0.0.1:9001 (Permission denied): choose another --port", False,
     "The local API server could not start: port 9001 cannot be used. Choose another port in Settings."),
    ("hearth: error: the model did not load: out of memory", False,
     "The local API server could not start: the model did not load: out of memory."),
    ("it crashed", True, "The local API server stopped unexpectedly: it crashed."),
])
def test_failures_are_said_in_sentences(line, was_listening, expected):
    assert failure_text(line, 9001, was_listening) == expected
