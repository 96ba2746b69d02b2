"""ChatController on the scripted engine: a turn streams and is stored, Stop keeps the answer,
an engine error is the conversation's notice, a send after a failed load is refused (one while
loading waits: test_first_minute.py), regenerate is offered only for an answer."""

from __future__ import annotations

import pytest

from engine import protocol as p
from model_store.conversations import ConversationStore
from tests.fakes.engine_client import answer, fail, hold
from ui.item_models.conversation_list import ID_ROLE
from tests.helpers.gui import stored


def row_texts(app) -> list[str]:
    return [row.message.content for row in app.controller.messages.rows()]


def test_a_turn_streams_delta_by_delta_and_is_stored(start_scripted, engine):
    engine.script(p.AnswerTurn, answer("The sea", " is", " wide."))
    app = start_scripted()
    shown: list[str] = []
    app.controller.messages.dataChanged.connect(
        lambda top, *_: shown.append(app.controller.messages.row(top.row()).message.content))

    assert app.controller.send("Tell me about the sea.")
    turn = app.wait_turn()

    assert list(dict.fromkeys(text for text in shown if text)) == ["The sea", "The sea is", "The sea is wide."], \
        "the answer grows one delta at a time"
    (command,) = engine.sent(p.AnswerTurn)
    assert [(m.role, m.content) for m in command.messages] == [("user", "Tell me about the sea.")]
    assert command.conversation_id == turn.conversation_id and command.answer_id == turn.answer.id
    branch = stored(app, lambda s: s.current_branch(turn.conversation_id))
    assert [(m.role, m.content, m.status) for m in branch] == [("user", "Tell me about the sea.", "done"),
                                                              ("assistant", "The sea is wide.", "done")]
    assert branch[1].stats["timings"]["gen_n"] == 3 and "interrupted_by" not in branch[1].stats
    assert [c.title for c in stored(app, lambda s: s.list())] == ["Tell me about the sea."]
    assert not app.controller.generating


def test_stop_keeps_what_was_written_marked_stopped(start_scripted, engine):
    engine.script(p.AnswerTurn, hold("Once", " upon", " a time"))
    app = start_scripted()
    assert app.controller.send("Tell me a story.")
    app.wait(lambda: row_texts(app)[-1:] == ["Once upon a time"])
    assert app.controller.generating and engine.holding is not None

    app.controller.stop()
    turn = app.wait_turn()

    assert [c.request_id for c in engine.sent(p.Cancel)] == [turn.command.request_id]
    assert turn.finished.finish_reason == "cancelled"
    (answer_row,) = [m for m in stored(app, lambda s: s.current_branch(turn.conversation_id)) if m.role == "assistant"]
    assert (answer_row.content, answer_row.status) == ("Once upon a time", "stopped")
    assert "interrupted_by" not in answer_row.stats, "a stop the user asked for is not an interruption"


def test_an_engine_error_is_the_conversations_notice_and_goes_with_it(start_scripted, engine):
    engine.script(p.AnswerTurn, fail("generation_failed", "the context is full: start a new chat"))
    app = start_scripted()
    notices: list[tuple[str, str]] = []
    app.controller.conversation_notice.connect(lambda kind, text: notices.append((kind, text)))

    assert app.controller.send("A paste longer than the context")
    turn = app.wait_turn()

    assert notices == [("error", "the context is full: start a new chat")]
    assert "the context is full" in app.window.banner.text()
    (answer_row,) = [m for m in stored(app, lambda s: s.current_branch(turn.conversation_id)) if m.role == "assistant"]
    assert (answer_row.content, answer_row.status) == ("", "error")
    assert answer_row.stats["errors"] == ["the context is full: start a new chat"]

    app.controller.new_conversation()
    assert app.controller.conversation is None
    assert "the context is full" not in app.window.banner.text(), "the notice was about the conversation left"


def test_a_message_is_refused_after_the_model_failed_to_load(start_scripted, engine):
    engine.script(p.LoadModel, fail("model_load_failed", "model.gguf is not a GGUF file"))
    app = start_scripted(wait_loaded=False)
    app.wait(lambda: "model.gguf is not a GGUF file" in app.window.banner.text())
    notices: list[tuple[str, str, str]] = []
    app.controller.passing_notice.connect(lambda kind, text, cause: notices.append((kind, text, cause)))

    assert not app.controller.send("Hello?")

    assert notices == [("warning", "No model is loaded, so your message was not sent; it is still in the message "
                                   "box. Choose a model.", "model")]
    assert not app.controller.generating and app.controller.conversation is None
    assert engine.sent(p.ANSWERS) == [] and stored(app, lambda s: s.list()) == []


def test_regenerate_is_offered_only_when_there_is_an_answer(start_scripted, engine):
    app = start_scripted()
    action = app.window.regenerate_action  # Edit → Regenerate answer (Ctrl+R); the answer's own Regenerate too
    assert app.controller.answer_to_regenerate() is None and not action.isEnabled()
    assert not app.controller.regenerate() and engine.sent(p.ANSWERS) == []

    engine.script(p.AnswerTurn, hold("Blue"), answer("Green"))
    assert app.controller.send("Name a colour.")
    app.wait(lambda: engine.holding is not None and len(app.window.chat_view.widgets) == 2)  # sent, and shown
    assert not action.isEnabled() and not app.controller.regenerate(), "not while the answer is being written"
    assert app.window.chat_view.widgets[1].regenerate.isHidden(), "nor on the answer being written"
    engine.release()
    first = app.wait_turn()
    assert app.controller.answer_to_regenerate().id == first.answer.id and action.isEnabled()
    assert not app.window.chat_view.widgets[1].regenerate.isHidden(), "among the answer's actions (on hover)"

    assert app.controller.regenerate()
    second = app.wait_turn(2)
    assert second.user.id == first.user.id and second.answer.id != first.answer.id and second.text == "Green"
    assert [(m.role, m.content) for m in engine.sent(p.AnswerTurn)[1].messages] == [("user", "Name a colour.")]
    answers = stored(app, lambda s: s.children(first.user.id))
    assert [(m.id, m.content) for m in answers] == [(first.answer.id, "Blue"), (second.answer.id, "Green")]


def test_a_turn_moves_its_conversation_to_the_top_without_listing_every_conversation(start_scripted, monkeypatch):
    app = start_scripted()
    app.send_and_wait("First conversation")
    first_id = app.controller.conversation.id
    app.controller.new_conversation()
    app.send_and_wait("Second conversation")
    panel = app.window.conversation_panel
    assert panel.list.currentIndex().data(ID_ROLE) == app.controller.conversation.id, "a new chat's row is selected"
    listings = []
    original_list = ConversationStore.list
    monkeypatch.setattr(ConversationStore, "list", lambda store, *a, **k: listings.append(a) or original_list(store, *a, **k))
    app.controller.open_conversation(first_id)
    app.wait(lambda: app.controller.conversation is not None and app.controller.conversation.id == first_id)

    app.send_and_wait("Back to the first")

    model = app.controller.conversations
    assert [model.conversation(row).title for row in range(model.rowCount())] == [
        "First conversation", "Second conversation"]
    assert listings == [], "a turn moves one row; it does not list every conversation again"
    assert panel.list.currentIndex().data(ID_ROLE) == first_id
    app.controller.search("second")
    app.wait(lambda: model.rowCount() == 1)
    assert listings, "a search is the store's to answer"
