"""Remote engines in the window, on the scripted engine (:class:`tests.helpers.remote_gui.RemoteScripted`
answers ``engine:NAME`` as the routing client delivers a remote engine's events): the model picker,
the consent asked once per conversation and engine, the marker above the chat, each answer's hover,
the telemetry panel and a failure's banner. The store, the controllers and the widgets are real.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.services.engines import EngineEntry, EngineRegistry
from app.services.paths import user_paths
from app.services.settings import load_settings
from engine import protocol as p
from model_store.installed import EMBEDDED_NAME
from tests.fakes.engine_client import Step, fail
from tests.helpers.gui import stored
from tests.helpers.remote_gui import SERVER_MODEL, RemoteScripted, choose, secret_store, start_window
from ui.remote_text import NOT_REMOTE

URL = "http://127.0.0.1:9/v1"
GPU = "engine:gpu"
LEAVES = "answered on gpu: messages leave this computer"


@pytest.fixture(autouse=True)
def engines():
    """One remote engine, "gpu", in the test's config folder; no secret store is touched."""
    with secret_store(None):
        EngineRegistry().add(EngineEntry("gpu", URL, SERVER_MODEL))
        yield


@pytest.fixture
def engine() -> RemoteScripted:
    return RemoteScripted()


@pytest.fixture
def app(qtbot, engine):
    running = start_window(qtbot, engine)
    running.real_ask = running.window.engine_choice.ask  # the window's own question, a modal box
    running.window.engine_choice.ask = Asked()  # which would wait for ever: one test answers it
    running.wait_loaded()
    return running


class Asked(list):
    """Stands for the user asked for consent: records each question, answers ``self.answer``."""

    answer = True

    def __call__(self, name: str, url: str) -> bool:
        self.append((name, url))
        return self.answer


@pytest.fixture
def asked(app) -> Asked:
    return app.window.engine_choice.ask


def load(app, ref: str) -> None:
    choose(app, ref)
    app.wait(lambda: app.controller.loaded is not None and app.controller.model_ref == ref)


def conversation_settings(app) -> dict:
    conversation_id = app.controller.conversation.id
    return stored(app, lambda s: s.get(conversation_id).settings)


def marker(app) -> str:
    return app.window.remote_marker.accessibleName() if app.window.remote_marker.isVisible() else ""


def test_the_picker_lists_remote_engines_and_choosing_one_loads_it_for_the_session(app, engine):
    combo = app.window.model_picker.combo
    assert combo.itemText(combo.findData(GPU)) == f"gpu — {SERVER_MODEL} (remote)"
    load(app, GPU)
    assert engine.sent(p.LoadModel)[-1].model == GPU
    assert app.window.telemetry_panel.model_name_label.text() == f"{SERVER_MODEL} on gpu (remote)"
    assert load_settings(user_paths().config).settings.model == "default", "the saved model stays local"
    assert not app.window.banner.isVisible()


def test_an_engine_added_in_settings_is_listed_in_the_picker_at_once(app, qtbot):
    dialog = app.window.open_engines()
    form = dialog.add()
    form.name.setText("box")
    form.url.setText("https://box.example.com")
    form.accept()
    assert app.window.model_picker.combo.findData("engine:box") >= 0
    dialog.select("box")
    dialog.remove()
    assert app.window.model_picker.combo.findData("engine:box") < 0


def test_settings_opens_the_engines_above_itself(app, qtbot):
    app.window.open_settings()
    settings = app.window.settings_dialog
    qtbot.mouseClick(settings.engines_button, Qt.MouseButton.LeftButton)
    engines = app.window.engines_dialog
    assert engines.isVisible() and engines.parent() is settings and engines.rows()[1][0] == "gpu"
    assert app.window.open_engines() is engines, "one at a time"
    engines.reject()
    settings.reject()


def test_switching_a_conversation_to_a_remote_engine_asks_once(app, asked):
    app.send_and_wait("Hello here")
    load(app, GPU)
    assert asked == [("gpu", URL)]
    app.wait_idle_store()
    assert conversation_settings(app) == {"remote_ok": ["gpu"]}

    load(app, "default")
    load(app, GPU)
    conversation_id = app.controller.conversation.id
    app.window.new_chat()
    app.window.engine_choice._granted.clear()  # only what the store kept counts now
    app.controller.open_conversation(conversation_id)
    app.wait(lambda: app.controller.conversation is not None and len(app.controller.messages.rows()) == 2)
    load(app, "default")
    load(app, GPU)
    assert asked == [("gpu", URL)], "asked once for this conversation and engine"


def test_a_no_keeps_the_conversation_on_this_computer(app, asked, engine):
    app.send_and_wait("Hello here")
    asked.answer = False
    choose(app, GPU)
    assert asked == [("gpu", URL)]
    assert app.controller.model_ref == "default" and engine.sent(p.LoadModel)[-1].model == "default"
    assert app.window.model_picker.combo.currentData() == "default"
    assert conversation_settings(app) == {}


def test_the_question_is_a_message_box_naming_the_engine_and_its_address(app):
    app.send_and_wait("Hello here")
    app.window.engine_choice.ask = app.real_ask
    seen = []

    def answer_yes() -> None:
        box = QApplication.activeModalWidget()
        seen.append(box.text())
        box.button(QMessageBox.StandardButton.Yes).click()

    QTimer.singleShot(0, answer_yes)
    load(app, GPU)
    assert seen == [f"Messages of this conversation will be sent to gpu ({URL}). Continue?"]


def test_a_conversation_opened_while_a_remote_engine_is_in_use_asks_before_sending(app, asked):
    app.send_and_wait("Local question")
    conversation_id = app.controller.conversation.id
    app.window.new_chat()
    load(app, GPU)
    assert asked == [], "a new conversation has nothing to send yet"
    app.controller.open_conversation(conversation_id)
    app.wait(lambda: len(app.controller.messages.rows()) == 2)
    asked.answer = False
    app.type_and_send("Second question")
    assert asked == [("gpu", URL)] and app.window.composer.text() == "Second question", "kept, not sent"
    asked.answer = True
    turn = app.send_and_wait("Second question")
    assert len(asked) == 2 and turn.finished.remote.engine == "gpu"


def test_attaching_a_document_to_a_conversation_asks_before_it_goes_to_the_engine(app, asked, tmp_path):
    app.send_and_wait("Local question")
    conversation_id = app.controller.conversation.id
    app.window.new_chat()
    load(app, GPU)
    app.controller.open_conversation(conversation_id)
    app.wait(lambda: len(app.controller.messages.rows()) == 2)
    notes = tmp_path / "notes.txt"
    notes.write_text("Tea grows on hills.", encoding="utf-8")
    asked.answer = False
    assert not app.window.documents.attach(notes), "refused: nothing is read or sent"
    assert asked == [("gpu", URL)] and not app.window.documents.busy
    asked.answer = True
    assert app.window.documents.attach(notes) and len(asked) == 2


def test_the_marker_stays_on_a_conversation_answered_remotely(app, asked):
    assert marker(app) == ""
    load(app, GPU)
    assert marker(app) == LEAVES, "a new chat on a remote engine is marked before its first message"
    app.send_and_wait("Remote question")
    assert asked == [], "started on the engine: nothing to ask"
    assert conversation_settings(app) == {"remote_ok": ["gpu"]}
    load(app, "default")
    assert marker(app) == LEAVES, "answered there once: still marked"
    app.window.new_chat()
    assert marker(app) == ""


def test_each_answer_says_which_engine_and_model_wrote_it(app, engine):
    app.send_and_wait("Local question")
    load(app, GPU)
    app.send_and_wait("Remote question")
    local, remote = app.window.chat_view.widgets[1], app.window.chat_view.widgets[3]
    assert local.toolTip().splitlines()[0] == f"this computer · {EMBEDDED_NAME}"
    assert remote.toolTip().splitlines()[:2] == [f"gpu · {SERVER_MODEL}",
                                                 "7 prompt tokens reused from the server's cache"]
    assert remote.who.text() == SERVER_MODEL
    stats = app.controller.messages.rows()[3].message.stats
    assert stats["engine"] == "gpu" and stats["remote"]["cached_tokens"] == 7


def test_the_telemetry_panel_names_the_remote_engine_and_fakes_no_numbers(app, engine):
    load(app, GPU)
    panel = app.window.telemetry_panel
    assert panel.values()["decode_device"] == "remote engine gpu"
    engine.telemetry(remote="gpu", rss_bytes=0, available_bytes=0, decode_tok_s=42.0, ttft_ms=180.0,
                     phase_devices={"prefill": "remote", "decode": "remote"})
    app.wait(lambda: panel.values()["memory"] == "remote engine gpu")
    values = panel.values()
    assert values["decode_rate"] == "42.0 tok/s" and values["ttft"] == "180 ms"
    assert values["prefill_device"] == values["decode_device"] == "remote engine gpu"
    for key in ("draft_acceptance", "model_size", "state_fixed", "state_kv", "kv_cache", "cpu_temperature",
                "throttling"):
        assert values[key] == NOT_REMOTE, key
    assert panel.usage_bar.usage() == (0, 0)

    load(app, "default")
    engine.telemetry(rss_bytes=300 * 1024**2, available_bytes=2 * 1024**3)
    app.wait(lambda: panel.values()["memory"] == "300.0 MiB (2.00 GiB available)")
    assert panel.values()["decode_device"] == "cpu" and panel.values()["state_fixed"] != NOT_REMOTE


def test_a_remote_failure_is_a_banner_and_the_partial_answer_stays(app, engine):
    load(app, GPU)
    cut = "the engine gpu closed the connection in the middle of the answer; the text so far is kept"
    engine.script(p.AnswerTurn, Step(pieces=("Half", " an answer"), error=("remote_disconnected", cut)))
    turn = app.send_and_wait("Remote question")
    assert turn.status == "error" and cut in app.window.banner.text()
    answer = app.controller.messages.rows()[1].message
    assert (answer.content, answer.status) == ("Half an answer", "error")
    assert stored(app, lambda s: s.message(answer.id).content) == "Half an answer"


def test_a_busy_engine_is_said_in_the_status_line_while_the_request_waits(app, engine):
    load(app, GPU)
    engine.script(p.AnswerTurn, Step(pieces=(), hold=True))
    app.type_and_send("Remote question")
    app.wait(lambda: bool(engine.sent(p.AnswerTurn)))
    waiting = "the engine gpu is busy (HTTP 429); trying again in 2 s (try 3 of 4)"
    engine._emit(p.RemoteWaiting(request_id=engine.sent(p.AnswerTurn)[-1].request_id, message=waiting, wait_s=2,
                                 attempt=3))
    app.wait(lambda: app.window.status_line.text() == "The engine gpu is busy (HTTP 429); trying again in 2 s "
                                                       "(try 3 of 4).")
    assert app.controller.generating and not app.window.banner.text()  # waiting is no failure
    engine.release()


def test_an_engine_that_cannot_be_reached_is_said_in_the_banner(app, engine):
    unreachable = f"cannot reach the engine gpu at {URL}; check that the server is running"
    engine.script(p.LoadModel, fail("remote_unreachable", unreachable))
    choose(app, GPU)
    app.wait(lambda: unreachable in app.window.banner.text())
    assert app.window.banner.kind == "error" and app.controller.loaded is None
    assert marker(app) == "" and app.window.model_picker.state.text() == "not loaded"
