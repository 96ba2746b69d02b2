"""The window's first minute on the scripted engine (issue 31): loading is said at
once and by name, a question asked meanwhile waits in the chat and is answered once the model is in
(or goes back to the message box), notices go when their cause does, the telemetry dock is closed
for a new user and then as the user left it (point 11), and a long status line moves nothing else
(point 6). tests/ui/test_first_minute.py does the same
with a real worker."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

from app.services.paths import user_paths
from app.services.settings import load_settings
from engine import protocol as p
from model_store.installed import EMBEDDED_NAME
from tests.fakes.engine_client import fail, hold
from tests.helpers.gui import stored
from ui.held_question import WAITING
from ui.model_loading import RESTARTED
from ui.views.telemetry_panel import NO_MODEL_TEXT

LOADING = f"Loading {EMBEDDED_NAME}…"
NOT_A_GGUF = "model.gguf is not a GGUF file"


def transcript(app) -> list[tuple[str, str, str]]:
    return [(r.message.role, r.message.content, r.message.status) for r in app.controller.messages.rows()]


# -- 4. Loading is said at once, by name ------------------------------------------------------------

def test_from_the_first_moment_the_picker_and_telemetry_say_which_model_is_loading(start_scripted, engine):
    engine.script(p.LoadModel, hold())
    app = start_scripted(wait_loaded=False)
    picker, panel = app.window.model_picker, app.window.telemetry_panel
    assert picker.state.text() == LOADING and picker.progress.isVisibleTo(picker), "before the worker is even up"
    assert panel.model_name_label.text() == LOADING

    app.wait(lambda: engine.holding is not None)
    app.wait(lambda: picker.progress.value() == 50)  # the worker's load progress
    assert picker.state.text() == LOADING and panel.model_name_label.text() == LOADING
    engine.release()
    app.wait_loaded()
    assert not picker.progress.isVisibleTo(picker) and picker.state.text().startswith("Reads up to ")
    assert panel.model_name_label.text() == EMBEDDED_NAME


def test_telemetry_says_the_engine_is_restarting_after_a_death_not_that_no_model_is_loaded(start_scripted, engine):
    app = start_scripted()
    engine.script(p.LoadModel, hold())
    engine.die()
    app.wait(lambda: engine.holding is not None)
    assert app.window.telemetry_panel.model_name_label.text() == LOADING
    engine.release()
    app.wait_loaded()
    engine.script(p.LoadModel, fail("model_load_failed", NOT_A_GGUF))
    app.controller.load_model("default")
    app.wait(lambda: NOT_A_GGUF in app.window.banner.text())
    assert app.window.telemetry_panel.model_name_label.text() == NO_MODEL_TEXT, "a failed load leaves no model"


# -- 4. A question asked while loading ----------------------------------------------------------------

def test_a_question_asked_while_loading_waits_in_the_chat_and_is_answered_once_the_model_is_in(
        start_scripted, engine):
    engine.script(p.LoadModel, hold())
    app = start_scripted(wait_loaded=False)
    app.type_and_send("Hello?")

    assert app.window.composer.text() == "", "sent, as far as the user is concerned"
    assert transcript(app) == [("user", "Hello?", WAITING)]
    app.wait(lambda: len(app.window.chat_view.widgets) == 1)
    assert app.window.chat_view.widgets[0].state.text() == "waiting for the model to load…"
    assert app.window.banner.text() == "", "nothing refused"
    assert app.controller.generating and app.window.composer.send_button.text() == "Stop"

    app.wait(lambda: engine.holding is not None)
    assert engine.sent(p.ANSWERS) == [] and stored(app, lambda s: s.list()) == []
    engine.release()
    turn = app.wait_turn()
    assert transcript(app) == [("user", "Hello?", "done"), ("assistant", "Hello from the scripted engine.", "done")]
    assert [m.content for m in engine.sent(p.AnswerTurn)[0].messages] == ["Hello?"]
    assert [c.title for c in stored(app, lambda s: s.list())] == ["Hello?"]
    assert turn.status == "done" and not app.controller.generating


@pytest.mark.parametrize("how", ["stopped", "load-failed", "new-chat"])
def test_a_waiting_question_goes_back_to_the_message_box_when_it_cannot_be_sent(start_scripted, engine, how):
    engine.script(p.LoadModel, fail("model_load_failed", NOT_A_GGUF) if how == "load-failed" else hold())
    app = start_scripted(wait_loaded=False)
    app.type_and_send("Hello?")  # before the worker is up: the load has not even been asked for
    assert transcript(app) == [("user", "Hello?", WAITING)]

    if how == "stopped":
        app.qtbot.mouseClick(app.window.composer.send_button, Qt.MouseButton.LeftButton)  # "Stop"
    elif how == "new-chat":
        app.window.new_chat()  # leaving it for a new chat gives it back too, not into a cleared box
    else:
        app.wait(lambda: NOT_A_GGUF in app.window.banner.text())
    app.wait(lambda: app.window.composer.text() == "Hello?")
    assert transcript(app) == [] and not app.controller.generating
    assert engine.sent(p.ANSWERS) == [] and stored(app, lambda s: s.list()) == []


# -- 4. Notices that go when their cause does ---------------------------------------------------------

def test_a_load_failure_and_a_refused_message_are_taken_down_when_a_model_loads(start_scripted, engine):
    engine.script(p.LoadModel, fail("model_load_failed", NOT_A_GGUF))
    app = start_scripted(wait_loaded=False)
    banner = app.window.banner
    app.wait(lambda: NOT_A_GGUF in banner.text())
    assert not app.controller.send("Hello?")
    assert "No model is loaded, so your message was not sent" in banner.text()

    app.controller.load_model("default")
    app.wait_loaded()
    assert banner.text() == "" and not banner.isVisible()


def test_a_crash_notice_goes_when_the_engine_is_back_and_its_news_with_the_next_answer(start_scripted, engine):
    app = start_scripted()
    banner = app.window.banner
    engine.script(p.LoadModel, hold())
    engine.die()
    app.wait(lambda: "Restarting it" in banner.text())
    engine.release()
    app.wait(lambda: banner.text() == RESTARTED)
    app.send_and_wait("Still there?")
    assert banner.text() == "", "the restart was news until an answer came"


def test_a_message_the_store_could_not_save_goes_back_and_the_notice_goes_with_the_next_write(
        start_scripted, engine, monkeypatch):
    from app.services import turn_start

    app = start_scripted()
    real_start_turn = turn_start.start_turn

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(turn_start, "start_turn", full_disk)
    app.type_and_send("Will this be kept?")
    app.wait(lambda: "Could not save your message" in app.window.banner.text())
    assert "it is back in the message box" in app.window.banner.text()
    assert app.window.composer.text() == "Will this be kept?"

    monkeypatch.setattr(turn_start, "start_turn", real_start_turn)
    app.type_and_send("Will this be kept?")
    app.wait_turn()
    assert app.window.banner.text() == ""


# -- 11. Telemetry: closed for a new user, then as it was left ------------------------------------

def test_telemetry_is_closed_for_a_new_user_one_click_away_and_remembered(start_scripted, engine, qtbot):
    app = start_scripted()
    dock, action = app.window.telemetry_dock, app.window.telemetry_dock.toggleViewAction()
    assert not dock.isVisible() and action.isCheckable() and not action.isChecked()
    assert action in app.window.menuBar().actions()[2].menu().actions(), "View → Telemetry"

    action.trigger()
    assert dock.isVisible() and load_settings(user_paths().config).settings.telemetry_open
    app.window.close()  # closing the window hides the dock too: not the user's choice
    assert load_settings(user_paths().config).settings.telemetry_open

    again = start_scripted()
    assert again.window.telemetry_dock.isVisible() and again.window.telemetry_dock.toggleViewAction().isChecked()
    again.window.telemetry_dock.close()  # the dock's own close button
    assert not load_settings(user_paths().config).settings.telemetry_open


# -- 6. A status line that changes length moves nothing else ----------------------------------------

LONG_STATUS = ("No snapshot used (the model file changed since the conversation was saved, and its template "
               "differs); the next answer reads the conversation again.")


def _picker_shows_its_whole_name(picker) -> bool:
    combo = picker.combo
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                         QStyle.SubControl.SC_ComboBoxEditField, combo)
    return combo.fontMetrics().horizontalAdvance(combo.currentText()) <= field.width()


@pytest.mark.parametrize("telemetry", ["closed", "open"])
def test_a_long_status_narrows_neither_the_conversation_list_nor_the_model_picker(start_scripted, qtbot, telemetry):
    app = start_scripted()
    window = app.window
    if telemetry == "open":
        window.telemetry_dock.toggleViewAction().trigger()
    qtbot.wait(50)  # laid out
    sidebar, search = window.conversation_panel.width(), window.conversation_panel.search.width()
    assert window.model_picker.combo.currentText() == f"{EMBEDDED_NAME} (embedded default)"
    assert _picker_shows_its_whole_name(window.model_picker)

    app.controller.status.emit(LONG_STATUS)
    window.model_picker.show_state(LONG_STATUS)  # the picker's own state line, as long
    qtbot.wait(50)
    assert (window.conversation_panel.width(), window.conversation_panel.search.width()) == (sidebar, search)
    assert _picker_shows_its_whole_name(window.model_picker)
    assert window.status_line.text() == LONG_STATUS, "the whole text is kept (and in the tooltip when cut)"
    if window.status_line.shown_text() != LONG_STATUS:
        assert window.status_line.shown_text().endswith("…") and window.status_line.toolTip() == LONG_STATUS


def test_a_document_refused_while_loading_takes_its_notice_down_once_the_model_is_in(start_scripted, engine, tmp_path):
    from tests.helpers.documents import write_document

    engine.script(p.LoadModel, hold())
    app = start_scripted(wait_loaded=False)
    assert not app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    assert "No model is loaded yet" in app.window.banner.text()
    app.wait(lambda: engine.holding is not None)
    engine.release()
    app.wait_loaded()
    app.wait(lambda: "No model is loaded yet" not in app.window.banner.text())
