"""What the engine is asked to read: the branch without the empty answers that stopped turns left
(a killed command's placeholder, marked interrupted at the next start) and without a question the
engine refused (its answer failed before writing anything), for every command that
builds a prompt from the store: a new answer, opening a conversation, reading a document."""

from __future__ import annotations

import pytest

from app.services.document_loading import read_command
from app.services.turn import TurnOptions, answer_turn_command, open_conversation_command
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database


@pytest.fixture
def store(tmp_path):
    db = open_database(database_path(tmp_path))
    yield ConversationStore(db)
    db.close()


@pytest.fixture
def branch(store):
    """user → empty interrupted answer → user → half answer (interrupted) → user → empty answer still generating"""
    conversation = store.create("t")
    parent = None
    for role, content, status in [("user", "first", "done"), ("assistant", "", "interrupted"),
                                  ("user", "second", "done"), ("assistant", "half an ans", "interrupted"),
                                  ("user", "third", "done"), ("assistant", "", "error"),
                                  ("user", "fourth", "done"), ("assistant", "", "done"),
                                  ("user", "fifth", "done"), ("assistant", "", "generating")]:
        parent = store.add_message(conversation.id, role, content, parent_id=parent, status=status).id
    return conversation.id, store.current_branch(conversation.id)


WANTED = [("user", "first"), ("user", "second"), ("assistant", "half an ans"),  # "third" failed with nothing written
          ("user", "fourth"), ("assistant", ""), ("user", "fifth")]  # a finished empty answer is what the model said


def test_a_new_answer_reads_no_empty_unfinished_answers(store, branch):
    conversation_id, history = branch
    command = answer_turn_command(history[:-1], store.get(conversation_id), "answer-id", TurnOptions())
    assert [(t.role, t.content) for t in command.messages] == WANTED


def test_opening_a_conversation_restores_no_empty_unfinished_answers(store, branch):
    conversation_id, _ = branch
    command = open_conversation_command(store, conversation_id)
    assert [(t.role, t.content) for t in command.messages] == WANTED


def test_reading_a_document_after_them_skips_them_too(store, branch):
    conversation_id, history = branch
    document = store.add_message(conversation_id, "user", "Document: d\n\ntext", parent_id=history[-1].id)
    command = read_command(store, conversation_id, document.id)
    assert [(t.role, t.content) for t in command.messages] == WANTED + [("user", "Document: d\n\ntext")]
