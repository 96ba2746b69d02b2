"""A ``hearth send`` killed mid-answer: its empty answer is marked interrupted when Hearth next starts
(any command, as the window does), later prompts leave it out, and a conversation whose first
message was never stored does not stay in the list."""

from __future__ import annotations

import json
import os
import signal
import time

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore
from tests.helpers.cli import hearth, start_hearth
from tests.helpers.template_turns import held_text

EMPTY_ANSWER = "<|im_start|>assistant\n<|im_end|>"  # an empty assistant turn in the models' ChatML prompts


def wait_for_placeholder(path, timeout: float = 120.0):
    """The conversation and the empty answer a running send stored (status generating)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            db = open_database(path)
            try:
                row = db.execute("SELECT conversation_id, id FROM messages WHERE status = 'generating'").fetchone()
            finally:
                db.close()
            if row:
                return row
        time.sleep(0.1)
    raise AssertionError("the send never stored its answer's placeholder")


def test_a_killed_send_leaves_an_interrupted_answer_that_later_prompts_leave_out(hearth_home, hybrid_tiny):
    path = database_path(hearth_home / "data")
    send = start_hearth("send", "--new", "Story", "--model", str(hybrid_tiny), "--max-tokens", "4000",
                        "--temperature", "0", "--draft", "off", "Tell me a long story.")
    conversation, placeholder = wait_for_placeholder(path)
    time.sleep(0.5)  # the answer is being written
    os.kill(send.pid, signal.SIGKILL)
    send.communicate(timeout=60)

    listed = hearth("conversations", "--json")  # any start tidies
    assert listed.returncode == 0, listed.stderr
    assert [c["id"] for c in json.loads(listed.stdout)] == [conversation]
    db = open_database(path)
    stopped = ConversationStore(db).message(placeholder)
    assert (stopped.status, stopped.content) == ("interrupted", "")
    db.close()

    sent = hearth("send", "--conversation", conversation, "--max-tokens", "8", "--temperature", "0", "--json",
                  "A short one, then.")
    assert sent.returncode == 0, sent.stderr
    answer = json.loads(sent.stdout)["message_id"]
    db = open_database(path)
    store, snapshots = ConversationStore(db), SnapshotStore(db)
    branch = store.current_branch(conversation)
    assert [(m.role, m.status) for m in branch] == [("user", "done"), ("assistant", "interrupted"),
                                                    ("user", "done"), ("assistant", "done")]
    (record,) = snapshots.for_message(answer)
    read = held_text(hybrid_tiny, snapshots, record)
    assert "Tell me a long story." in read and "A short one, then." in read
    assert EMPTY_ANSWER not in read, "the empty interrupted answer was part of the prompt"
    db.close()


def test_a_conversation_left_without_messages_is_not_listed(hearth_home):
    path = database_path(hearth_home / "data")
    db = open_database(path)
    store = ConversationStore(db)
    kept = store.create("Kept")
    store.add_message(kept.id, "user", "hello", parent_id=None)
    crashed = store.create("Its first message was never stored")
    db.execute("UPDATE conversations SET created_at = created_at - 3600, updated_at = updated_at - 3600"
               " WHERE id = ?", [crashed.id])  # an hour ago: no program is still about to add it
    db.conn.commit()
    db.close()
    listed = hearth("conversations", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [c["title"] for c in json.loads(listed.stdout)] == ["Kept"]
