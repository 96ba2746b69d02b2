"""What a turn sends for a conversation's system prompt (app.services.turn), on a real SQLite store: a
leading system message, the default for a new conversation, nothing for a conversation with no messages."""

from __future__ import annotations

import pytest

from app.services.turn import TurnOptions, Writer, answer_turn_command, open_conversation_command, start_turn
from app.services.document_loading import read_command
from engine import protocol as p
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database

WHO = Writer("a test")


@pytest.fixture
def store(tmp_path):
    database = open_database(database_path(tmp_path))
    yield ConversationStore(database)
    database.close()


def test_a_new_conversation_starts_with_the_default_and_sends_it_first(store):
    conversation, turn = start_turn(store, None, "Hello", TurnOptions(system_prompt="Be brief."), WHO, title="t")
    turn.writer.release(store.db)
    assert conversation.system_prompt == "Be brief."
    assert [(m.role, m.content) for m in turn.command.messages] == [("system", "Be brief."), ("user", "Hello")]
    assert turn.command.messages[0].id is None, "no stored message: no snapshot is looked for under it"


def test_an_existing_conversation_keeps_its_own_and_a_change_is_sent_with_the_next_message(store):
    conversation = store.create("kept", system_prompt="Answer in French.")
    _, turn = start_turn(store, conversation.id, "Hello", TurnOptions(system_prompt="Be brief."), WHO)
    turn.writer.release(store.db)
    assert turn.command.messages[0] == p.WireMessage("system", "Answer in French.")
    store.set_system_prompt(conversation.id, "")
    history = store.current_branch(conversation.id)
    command = answer_turn_command(history, store.get(conversation.id), "answer-id", TurnOptions())
    assert [m.role for m in command.messages] == ["user"], "empty: none is sent (the model's own default)"


def test_opening_and_reading_send_it_too_but_an_empty_conversation_sends_nothing(store):
    conversation = store.create("open", system_prompt="Be brief.")
    assert open_conversation_command(store, conversation.id).messages == []
    question = store.add_message(conversation.id, "user", "A document's text", parent_id=None)
    opened = open_conversation_command(store, conversation.id).messages
    read = read_command(store, conversation.id, question.id).messages
    assert opened == read == [p.WireMessage("system", "Be brief."), p.WireMessage("user", "A document's text", question.id)]


def test_a_branch_that_starts_with_a_system_message_is_sent_as_it_is(store):
    conversation = store.create("api", system_prompt="Be brief.")
    system = store.add_message(conversation.id, "system", "You are a poet.", parent_id=None)
    store.add_message(conversation.id, "user", "Hi", parent_id=system.id)
    command = answer_turn_command(store.current_branch(conversation.id), store.get(conversation.id), "a", TurnOptions())
    assert [(m.role, m.content) for m in command.messages] == [("system", "You are a poet."), ("user", "Hi")]
