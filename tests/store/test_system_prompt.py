"""A conversation's own system prompt (m010_conversation_system_prompt): kept, changed, and none for
conversations stored before it existed."""

from __future__ import annotations

import pytest
import sqlite_utils

from model_store.conversations import ConversationStore
from model_store.db import StoreError, open_database, write_transaction
from model_store.migrations import migrate


def test_a_new_conversation_keeps_the_system_prompt_it_was_made_with(convs):
    made = convs.create("Pirate talk", system_prompt="Answer like a pirate.")
    assert made.system_prompt == "Answer like a pirate."
    assert convs.get(made.id).system_prompt == "Answer like a pirate."
    assert convs.create("Plain").system_prompt == ""
    assert [c.system_prompt for c in convs.list()] == ["", "Answer like a pirate."]


def test_changing_it_keeps_the_messages_and_the_list_order(convs):
    first = convs.create("First")
    question = convs.add_message(first.id, "user", "Hello", parent_id=None)
    second = convs.create("Second")
    before = convs.get(first.id)
    changed = convs.set_system_prompt(first.id, "Be brief.\nUse British spelling.")
    assert changed.system_prompt == "Be brief.\nUse British spelling."
    assert (changed.updated_at, changed.leaf_id) == (before.updated_at, question.id)
    assert [c.id for c in convs.list()] == [second.id, first.id]
    assert convs.set_system_prompt(first.id, "").system_prompt == ""


def test_changing_a_missing_conversation_says_so(convs):
    with pytest.raises(StoreError):
        convs.set_system_prompt("no-such-id", "Hi")


def test_conversations_stored_before_the_column_have_none(db_path):
    db_path.parent.mkdir(parents=True)
    old = sqlite_utils.Database(db_path)
    migrate(old, write_transaction, upto="m008_message_reasoning")
    old_id = ConversationStore(old).create("from an older Hearth").id
    old.close()
    db = open_database(db_path)
    try:
        assert ConversationStore(db).get(old_id).system_prompt == ""
    finally:
        db.close()
