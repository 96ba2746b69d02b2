"""The window against a real remote engine: ``hearth serve`` (SmolLM2, with an API key) on 127.0.0.1.

Settings → Engines fetches the server's models and tests it over the network, off the GUI thread;
the window, talking through the same :class:`~app.engine_clients.remote.routing.RoutingClient` as ``python -m
app`` (around the scripted local engine, so only the remote side is real), answers on the server
and stores which engine and model did. Keys go to a keyring backend on a file of the test's.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.services.engines import EngineEntry, EngineRegistry
from app.engine_clients.remote.routing import RoutingClient
from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.gui import stored
from tests.helpers.memory_keyring import FILE_ENV, FileKeyring
from tests.helpers.remote_gui import choose, secret_store, start_window
from tests.helpers.serve import start_server
from ui.views.engines_dialog import EnginesDialog

pytestmark = [pytest.mark.slow, pytest.mark.process]
SERVER_KEY = "sk-hearth-gui-test"
SERVED_MODEL = "default"  # what `hearth serve` lists


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("remote-home"), HEARTH_API_KEY=SERVER_KEY)
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def secrets(tmp_path, monkeypatch):
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "secrets.json"))
    with secret_store(FileKeyring()):
        yield


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_the_form_fetches_the_servers_models_and_tests_it(qtbot, server):
    dialog = EnginesDialog(EngineRegistry())
    qtbot.addWidget(dialog)
    dialog.show()
    form = dialog.add()
    form.name.setText("hs")
    form.url.setText(server.root)  # no path: /v1 is added
    form.key.setText("wrong-key")
    click(qtbot, form.fetch)
    qtbot.waitUntil(form.fetch.isEnabled, timeout=60_000)
    assert "refused the API key" in form.context_note.text() and form.model.count() == 0

    form.key.setText(SERVER_KEY)
    click(qtbot, form.fetch)
    qtbot.waitUntil(form.fetch.isEnabled, timeout=60_000)
    assert [form.model.itemText(i) for i in range(form.model.count())] == [SERVED_MODEL]
    assert form.model.currentText() == SERVED_MODEL
    told = form.context.value()  # the server says how long its model's context is
    assert told > 0 and form.context_note.text() == f"The server says {SERVED_MODEL} reads up to {told:,} tokens."

    click(qtbot, form.test)
    qtbot.waitUntil(form.test.isEnabled, timeout=120_000)
    result = form.test_result.text()
    assert result.startswith("Works: ") and "tok/s" in result and "1 model." in result, result
    assert "plain http://" in result.lower(), "the address's warning is repeated with the result"

    click(qtbot, form.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok))
    assert dialog.rows()[1] == ("hs", server.base_url, SERVED_MODEL)
    click(qtbot, dialog.test_button)  # the saved engine, with its key from the secret store
    qtbot.waitUntil(dialog.test_button.isEnabled, timeout=120_000)
    assert dialog.status.text().startswith("hs: Works: "), dialog.status.text()


def test_a_message_answered_on_the_remote_engine_is_stored_with_it(qtbot, server):
    registry = EngineRegistry()
    registry.add(EngineEntry("hs", server.base_url), SERVER_KEY)
    local = ScriptedEngine()
    app = start_window(qtbot, RoutingClient(local, registry.remote_engine), registry)
    app.wait_loaded(timeout=30_000)

    choose(app, "engine:hs")
    app.wait(lambda: app.controller.loaded is not None and app.controller.loaded.facts.path == "engine:hs", 60_000)
    assert app.controller.bridge.client.active_engine == "hs"
    assert app.window.remote_marker.isVisible()
    assert app.window.remote_marker.accessibleName() == "answered on hs: messages leave this computer"

    turn = app.send_and_wait("Say hello in three words.")
    assert turn.status == "done" and turn.text.strip(), "the server wrote an answer"
    answer = stored(app, lambda s: s.message(turn.answer.id))
    assert answer.content == turn.text
    assert (answer.stats["engine"], answer.stats["model"]) == ("hs", SERVED_MODEL)
    assert answer.stats["remote"]["prompt_tokens"] > 0
    tooltip = app.window.chat_view.widgets[1].toolTip()
    assert tooltip.splitlines()[0] == f"hs · {SERVED_MODEL}", tooltip
    assert not local.sent(type(turn.command)), "nothing was answered on this computer"

    panel = app.window.telemetry_panel
    app.wait(lambda: panel.values()["memory"] == "remote engine hs", 10_000)
    assert panel.values()["decode_rate"] != "—"
    assert stored(app, lambda s: s.get(turn.conversation_id).settings) == {"remote_ok": ["hs"]}
