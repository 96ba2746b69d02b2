"""How an answer ended, kept with it (m009_message_outcome): a context that cut it off, a failure's
reason, in a real SQLite file that is closed and opened again; answers stored before keep the reason
their stats recorded."""

from __future__ import annotations

import sqlite_utils

from model_store.conversations import ConversationStore
from model_store.db import open_database, write_transaction
from model_store.migrations import migrate


def test_finish_and_error_are_kept_across_a_reopen(db_path):
    db = open_database(db_path)
    store = ConversationStore(db)
    conversation = store.create("outcomes")
    question = store.add_message(conversation.id, "user", "Tell me everything", parent_id=None)
    cut = store.add_message(conversation.id, "assistant", "", parent_id=question.id, status="generating")
    store.update_message(cut.id, content="It began", status="done", finish="context")
    failed = store.add_message(conversation.id, "assistant", "", parent_id=question.id, status="generating")
    store.update_message(failed.id, status="error", finish="error", error="this needs 9,000 tokens of context")
    db.close()

    again = ConversationStore(open_database(db_path))
    try:
        kept_cut, kept_failed = again.message(cut.id), again.message(failed.id)
        assert kept_cut.cut_off and kept_cut.status == "done" and kept_cut.error == ""
        assert kept_failed.error == "this needs 9,000 tokens of context" and not kept_failed.cut_off
        assert again.message(question.id).finish == ""
    finally:
        again.db.close()


def test_a_failed_answer_stored_before_keeps_the_reason_its_stats_recorded(db_path):
    db_path.parent.mkdir(parents=True)
    old = sqlite_utils.Database(db_path)
    migrate(old, write_transaction, upto="m008_message_reasoning")
    conversation_id = "c1"
    old.execute("INSERT INTO conversations (id, title, model, settings, created_at, updated_at, leaf_id)"
                " VALUES (?, 'old', 'default', '{}', 0, 0, NULL)", [conversation_id])
    for message_id, status, stats in (("failed", "error", '{"errors": ["the context is full", "again"]}'),
                                      ("done", "done", '{"elapsed_s": 1}'), ("broken", "error", "not json")):
        old.execute("INSERT INTO messages (id, conversation_id, parent_id, role, content, status, created_at, stats)"
                    " VALUES (?, ?, NULL, 'assistant', '', ?, 0, ?)", [message_id, conversation_id, status, stats])
    old.close()

    store = ConversationStore(open_database(db_path))
    try:
        failed = store.message("failed")
        assert (failed.finish, failed.error) == ("error", "the context is full; again")
        assert (store.message("done").finish, store.message("done").error) == ("", "")
        assert store.db.execute("SELECT finish, error FROM messages WHERE id = 'broken'").fetchone() == ("error", "")
    finally:
        store.db.close()
