"""A reasoning model in the window, on the scripted engine: its thinking streams into the answer's
Thinking section and is stored apart from the answer; a reopened conversation shows it closed."""

from __future__ import annotations

import re

import pytest

from engine import protocol as p
from tests.fakes.engine_client import ScriptedEngine, answer, hold
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
    assert widget.thinking.isVisible() and not widget.thinking.text.isVisible()
    assert re.fullmatch(r"Thought for [\d.]+ m?s · 5 words", widget.thinking.header.text()), "the stored time"
    assert widget.rendered_text().strip() == "Four."
