"""A reasoning model in the window, on the scripted engine: its thinking streams into the answer's
Thinking section and is stored apart from the answer; a reopened conversation shows it closed."""

from __future__ import annotations

import re

import pytest

from engine import protocol as p
from tests.fakes.engine_client import ScriptedEngine, answer, hold
from tests.helpers.documents import write_document
from tests.helpers.gui import stored


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(thinks=True, thinking_switch=True)


def test_a_streamed_answer_thinks_in_its_section_then_answers_below_it(start_scripted, engine):
    engine.script(p.AnswerTurn, hold(reasoning=("The user", " says hi.")))
    app = start_scripted()
    assert app.controller.send("Hi!")
    app.wait(lambda: len(app.window.chat_view.widgets) == 2)
    widget = app.window.chat_view.widgets[-1]
    app.wait(lambda: widget.thinking.text.text() == "The user says hi.")
    assert widget.thinking.text.isVisible() and widget.thinking.header.text() == "Thinking… · 4 words"

    engine.delta(reasoning=" Greet back.")
    engine.delta("Hello", reasoning="")
    engine.delta(" to you.")
    app.wait(lambda: widget.rendered_text().strip() == "Hello to you.")
    assert not widget.thinking.text.isVisible(), "closed once the answer began"
    assert re.fullmatch(r"Thought for [\d.]+ m?s · 6 words", widget.thinking.header.text())
    assert "Greet" not in widget.rendered_text()

    engine.release()
    turn = app.wait_turn()
    message = stored(app, lambda s: s.message(turn.answer.id))
    assert (message.content, message.reasoning) == ("Hello to you.", "The user says hi. Greet back.")
    assert message.stats["thinking_s"] >= 0
    assert widget.row.message.reasoning == "The user says hi. Greet back."
    widget.thinking.header.click()
    assert widget.thinking.text.text() == "The user says hi. Greet back."


def test_a_reopened_conversation_shows_its_reasoning_closed(start_scripted, engine):
    engine.script(p.AnswerTurn, answer("Four.", reasoning=("Two and two", " make four.")))
    app = start_scripted()
    assert app.controller.send("2+2?")
    turn = app.wait_turn()
    app.controller.new_conversation()
    app.wait(lambda: not app.window.chat_view.widgets)

    app.controller.open_conversation(turn.conversation_id)
    app.wait(lambda: len(app.window.chat_view.widgets) == 2 and app.window.chat_view.complete)
    widget = app.window.chat_view.widgets[-1]
    # Relative to the message: a widget added to a shown layout is itself shown by a queued call.
    assert widget.thinking.isVisibleTo(widget) and not widget.thinking.text.isVisibleTo(widget)
    assert re.fullmatch(r"Thought for [\d.]+ m?s · 5 words", widget.thinking.header.text()), "the stored time"
    assert widget.rendered_text().strip() == "Four."


# -- "Think before answering" ------------------------------------------------------------------------


def _switch(app):
    return app.window.composer.thinking


def test_the_switch_is_hidden_for_a_model_that_never_thinks(start_scripted, engine):
    engine.thinks = engine.thinking_switch = False
    app = start_scripted()
    assert _switch(app).isHidden()
    assert app.controller.send("Hi")
    app.wait_turn()
    assert engine.sent(p.AnswerTurn)[0].template.enable_thinking is None, "the model's default"


def test_a_model_that_always_thinks_shows_it_checked_and_disabled_saying_why(start_scripted, engine):
    engine.thinking_switch = False
    app = start_scripted()
    switch = _switch(app)
    assert switch.isVisible() and switch.isChecked() and not switch.isEnabled()
    assert "no switch" in switch.toolTip()


@pytest.mark.parametrize("thinks", [True, False])
def test_a_model_with_the_switch_starts_it_at_its_own_default(start_scripted, engine, thinks):
    engine.thinks = thinks
    app = start_scripted()
    switch = _switch(app)
    assert switch.isVisible() and switch.isEnabled() and switch.isChecked() is thinks
    assert switch.text() == "Think before answering"


def test_turned_off_in_a_new_chat_the_first_turn_and_the_new_conversation_take_it(start_scripted, engine):
    engine.script(p.AnswerTurn, answer("Hi.", reasoning=("Hmm.",)))
    app = start_scripted()
    switch = _switch(app)
    switch.click()
    assert not switch.isChecked()

    assert app.controller.send("Hello")
    turn = app.wait_turn()

    (command,) = engine.sent(p.AnswerTurn)
    assert command.template.enable_thinking is False
    assert stored(app, lambda s: s.get(turn.conversation_id)).settings["enable_thinking"] is False
    assert not switch.isChecked(), "the conversation on screen keeps it"
    assert stored(app, lambda s: s.message(turn.answer.id)).reasoning == "", "the model did not think"
    assert app.window.chat_view.widgets[-1].thinking.isHidden()

    app.window.new_chat()
    assert switch.isChecked(), "a new chat starts at the model's default"


def test_turned_off_in_a_conversation_its_next_turn_asks_so_and_it_is_kept(start_scripted, engine):
    app = start_scripted()
    assert app.controller.send("First")
    first = app.wait_turn()
    assert engine.sent(p.AnswerTurn)[0].template.enable_thinking is None
    switch = _switch(app)
    assert switch.isChecked()

    switch.click()
    assert app.controller.send("Second")
    app.wait_turn(2)
    assert engine.sent(p.AnswerTurn)[1].template.enable_thinking is False
    assert stored(app, lambda s: s.get(first.conversation_id)).settings["enable_thinking"] is False

    app.window.new_chat()
    assert switch.isChecked()
    app.controller.open_conversation(first.conversation_id)
    app.wait(lambda: app.controller.conversation is not None)
    assert not switch.isChecked(), "read back from the conversation's settings"
    assert app.controller.regenerate()
    app.wait_turn(3)
    assert engine.sent(p.AnswerTurn)[2].template.enable_thinking is False

    switch.click()
    assert switch.isChecked()
    assert app.controller.send("Third")
    app.wait_turn(4)
    assert engine.sent(p.AnswerTurn)[3].template.enable_thinking is True
    assert stored(app, lambda s: s.get(first.conversation_id)).settings["enable_thinking"] is True


def test_a_conversation_stored_with_thinking_off_opens_with_the_switch_off(start_scripted, engine):
    app = start_scripted()
    old = stored(app, lambda s: s.create("Quiet", settings={"enable_thinking": False}))
    stored(app, lambda s: s.add_message(old.id, "user", "Earlier", parent_id=None))
    app.controller.open_conversation(old.id)
    app.wait(lambda: app.controller.conversation is not None)
    assert not _switch(app).isChecked()
    assert app.controller.send("Again")
    app.wait_turn()
    assert engine.sent(p.AnswerTurn)[-1].template.enable_thinking is False, "read from its settings"


def test_a_document_opening_a_new_chat_takes_the_choice_made_for_it(start_scripted, engine, tmp_path):
    app = start_scripted()
    _switch(app).click()
    assert app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    app.wait(lambda: app.window.status_line.text().startswith("Read notes.txt"))

    (read,) = engine.sent(p.ReadDocument)
    assert read.template.enable_thinking is False, "read as its questions will be asked"
    assert stored(app, lambda s: s.get(read.conversation_id)).settings["enable_thinking"] is False
    assert not _switch(app).isChecked()
