"""Named migrations: fresh files, re-runs, old schemas brought up to date, unusable files."""

from __future__ import annotations

import json
import os
import threading

import pytest
import sqlite_utils

from model_store.conversations import ConversationStore
from model_store.db import StoreError, open_database, write_transaction
from model_store.migrations import MIGRATIONS, applied_migrations, migrate
from model_store.part_checksum import part_checksum
from model_store.snapshots import SnapshotStore

ALL = ["m001_conversations", "m002_snapshots", "m003_file_hashes", "m004_documents", "m005_models", "m006_writer_locks",
       "m007_snapshot_references", "m008_message_reasoning", "m009_message_outcome",
       "m010_conversation_system_prompt", "m011_eagle3_heads", "m012_snapshot_text_digest",
       "m013_snapshot_state_files", "m014_message_identity", "m015_message_tool_part"]
TABLES = {"_migrations", "conversations", "messages", "snapshots", "snapshot_parts", "file_hashes", "documents", "models",
          "writer_locks"}


def test_registry_order():
    assert [m.name for m in MIGRATIONS] == ALL


def test_fresh_database_gets_every_table_and_record(db):
    assert set(db.table_names()) == TABLES
    rows = list(db.execute("SELECT name, applied_at FROM _migrations ORDER BY rowid"))
    assert [name for name, _ in rows] == ALL
    assert all(isinstance(applied_at, float) for _, applied_at in rows)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 10000
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_schema_cascades_and_indexes(db):
    def cascades(table):
        # foreign_key_list rows: id, seq, table, from, to, on_update, on_delete, match
        rows = db.execute(f"PRAGMA foreign_key_list({table})").fetchall()
        return {(row[2], row[3]) for row in rows if row[6] == "CASCADE"}

    assert cascades("messages") == {("conversations", "conversation_id"), ("messages", "parent_id")}
    assert cascades("snapshots") == {
        ("conversations", "conversation_id"), ("messages", "message_id"), ("snapshots", "parent_id")
    }
    assert cascades("snapshot_parts") == {("snapshots", "snapshot_id")}
    message_indexes = {tuple(i.columns) for i in db["messages"].indexes}
    assert message_indexes >= {("conversation_id",), ("parent_id",)}
    assert ("message_id", "fingerprint") in {tuple(i.columns) for i in db["snapshots"].indexes}
    assert ("identity", "fingerprint") in {tuple(i.columns) for i in db["snapshots"].indexes}
    assert ("identity",) in message_indexes
    assert db["snapshot_parts"].pks == ["snapshot_id", "part", "seq"]
    assert db["file_hashes"].pks == ["path"]


def test_migrating_twice_applies_nothing(db, db_path):
    assert migrate(db, write_transaction) == []
    db.close()
    again = open_database(db_path)
    try:
        assert applied_migrations(again) == ALL
        assert again.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(ALL)
    finally:
        again.close()


def test_old_schema_is_brought_up_to_date(db_path):
    db_path.parent.mkdir(parents=True)
    old = sqlite_utils.Database(db_path)
    assert migrate(old, write_transaction, upto="m001_conversations") == ["m001_conversations"]
    assert set(old.table_names()) == {"_migrations", "conversations", "messages"}
    conv = ConversationStore(old).create("from an old version")
    old.close()

    db = open_database(db_path)
    try:
        assert applied_migrations(db) == ALL
        assert set(db.table_names()) == TABLES
        assert ConversationStore(db).get(conv.id).title == "from an old version"
    finally:
        db.close()


def test_unknown_upto_is_refused(db):
    with pytest.raises(ValueError, match="m999"):
        migrate(db, write_transaction, upto="m999")


@pytest.mark.parametrize("content", [os.urandom(8192), b"not a database, just text\n" * 10])
def test_garbage_file_raises_store_error_naming_it(tmp_path, content):
    path = tmp_path / "hearth.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as err:
        open_database(path)
    assert str(path) in str(err.value)
    assert "move it aside" in str(err.value)
    assert path.read_bytes() == content  # the user's file is left alone


def test_concurrent_first_opens_apply_each_migration_once(db_path):
    results, errors = [], []

    def open_one():
        try:
            db = open_database(db_path)
            try:
                results.append(applied_migrations(db))
            finally:
                db.close()
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [ALL] * 4


def test_the_worker_refuses_a_database_whose_schema_is_behind_and_writes_nothing(tmp_path):
    path = tmp_path / "hearth.db"
    old = sqlite_utils.Database(path)
    migrate(old, write_transaction, upto="m006_writer_locks")
    old.close()
    with pytest.raises(StoreError, match="older than this engine"):
        open_database(path, migrate=False)
    check = sqlite_utils.Database(path)
    assert "m007_snapshot_references" not in applied_migrations(check), "the worker never migrates"
    check.close()
    open_database(path).close()  # the app brings it up to date
    open_database(path, migrate=False).close()


def database_with_one_message(tmp_path, upto: str) -> tuple:
    """A database brought up to ``upto`` only, holding conversation ``c`` and its message ``m``."""
    path = tmp_path / "hearth.db"
    old = sqlite_utils.Database(path)
    migrate(old, write_transaction, upto=upto)
    old.execute("INSERT INTO conversations (id, title, model, settings, created_at, updated_at, leaf_id)"
                " VALUES ('c', 'old', 'default', '{}', 0, 0, NULL)")
    old.execute("INSERT INTO messages (id, conversation_id, parent_id, role, content, status, created_at, stats)"
                " VALUES ('m', 'c', NULL, 'user', 'hi', 'done', 0, '{}')")
    return path, old


def test_snapshots_saved_with_their_text_keep_only_its_length_and_digest_and_still_match(tmp_path):
    path, old = database_with_one_message(tmp_path, upto="m011_eagle3_heads")
    texts = {f"s{i}": f"<|im_start|>user\nQuestion {i} ☃<|im_end|>\n" * (i + 1) for i in range(450)}
    for snapshot_id, text in texts.items():
        old.execute("INSERT INTO snapshots (id, conversation_id, message_id, parent_id, fingerprint, format_version,"
                    " n_tokens, kv_start, text, created_at, last_used_at) VALUES (?, 'c', 'm', NULL, 'fp', 1, 3, 0, ?,"
                    " 0, 0)", [snapshot_id, text])
    old.close()

    db = open_database(path)
    try:
        assert "text" not in db["snapshots"].columns_dict
        snapshots = SnapshotStore(db)
        for snapshot_id, text in texts.items():
            record = snapshots.get(snapshot_id)
            assert record.holds(text) and record.starts(text + "<|im_start|>assistant\n")
            assert not record.starts(text[:-1]) and not record.holds(text.replace("☃", "*"))
    finally:
        db.close()


def test_state_parts_kept_in_the_database_move_to_files_and_a_damaged_one_is_dropped(tmp_path):
    path, old = database_with_one_message(tmp_path, upto="m012_snapshot_text_digest")
    recurrent, kv, tokens = os.urandom(3 << 20), os.urandom(5000), b"\x01\x00\x00\x00"
    parts = {"recurrent": recurrent, "kv": kv, "prefill_tokens": tokens}
    checksums = {name: part_checksum(data) for name, data in parts.items()}
    checksums["kv"] = part_checksum(b"other bytes")  # damaged since it was saved
    old.execute("INSERT INTO snapshots (id, conversation_id, message_id, parent_id, fingerprint, format_version,"
                " n_tokens, kv_start, text_chars, text_digest, checksums, part_bytes, created_at, last_used_at)"
                " VALUES ('s', 'c', 'm', NULL, 'fp', 1, 1, 0, 2, 'd', ?, ?, 0, 0)",
                [json.dumps(checksums), json.dumps({name: len(data) for name, data in parts.items()})])
    for name, data in parts.items():
        for seq, start in enumerate(range(0, len(data), 1 << 20)):
            old.execute("INSERT INTO snapshot_parts (snapshot_id, part, seq, data) VALUES ('s', ?, ?, ?)",
                        [name, seq, data[start:start + (1 << 20)]])
    old.close()

    db = open_database(path)
    try:
        snapshots = SnapshotStore(db)
        record = snapshots.get("s")
        assert bytes(snapshots.read_part("s", "recurrent")) == recurrent
        assert bytes(snapshots.read_part("s", "prefill_tokens")) == tokens
        assert not record.has_part("kv"), "a part that no longer matches its checksum is dropped, as eviction would"
        assert db.execute("SELECT DISTINCT part FROM snapshot_parts").fetchall() == [("prefill_tokens",)]
        assert [f.name for f in snapshots.files.folder.iterdir()] == [snapshots.files.path(checksums["recurrent"]).name]
    finally:
        db.close()


def test_stored_messages_and_their_snapshots_get_the_identity_a_new_message_would_have(tmp_path):
    path, old = database_with_one_message(tmp_path, upto="m013_snapshot_state_files")
    rows = [("a", "m", "assistant", "hello", "thought"), ("b", "a", "user", "more", ""),
            ("x", "m", "assistant", "other", "")]
    # "late" answers "early", stored after it: a recovered or imported tree need not be in order
    old.execute("PRAGMA foreign_keys = OFF")
    for message_id, parent_id, role, content, reasoning in [*rows, ("late", "early", "assistant", "yes", ""),
                                                            ("early", "b", "user", "sure?", "")]:
        old.execute("INSERT INTO messages (id, conversation_id, parent_id, role, content, status, created_at, stats,"
                    " reasoning) VALUES (?, 'c', ?, ?, ?, 'done', 0, '{}', ?)",
                    [message_id, parent_id, role, content, reasoning])
    old.execute("INSERT INTO snapshots (id, conversation_id, message_id, parent_id, fingerprint, format_version,"
                " n_tokens, kv_start, created_at, last_used_at) VALUES ('s', 'c', 'b', NULL, 'fp', 1, 3, 0, 0, 0)")
    old.close()

    db = open_database(path)
    try:
        store = ConversationStore(db)
        fresh = store.create("new")
        parent = None
        for message_id in ("m", "a", "b", "early", "late"):
            old_message = store.message(message_id)
            parent = store.add_message(fresh.id, old_message.role, old_message.content, parent_id=parent,
                                       reasoning=old_message.reasoning).id
            assert store.message(parent).identity == old_message.identity, message_id
        assert len({store.message(m).identity for m in ("m", "a", "b", "x", "early", "late")}) == 6
        assert SnapshotStore(db).get("s").identity == store.message("b").identity
        assert SnapshotStore(db).find(store.message("b").identity, "fp").id == "s"
    finally:
        db.close()


def test_an_answer_whose_text_changes_gets_a_new_identity_and_so_do_messages_after_it(db):
    store = ConversationStore(db)
    conversation = store.create("c")
    question = store.add_message(conversation.id, "user", "hi", parent_id=None)
    answer = store.add_message(conversation.id, "assistant", "", parent_id=question.id, status="generating")
    after = store.add_message(conversation.id, "user", "and?", parent_id=answer.id)
    written = store.update_message(answer.id, content="hello", reasoning="greet", status="done")
    assert written.identity != answer.identity
    assert store.message(after.id).identity != after.identity
    again = store.add_message(conversation.id, "assistant", "hello", parent_id=question.id, reasoning="greet")
    assert again.identity == written.identity and store.with_identity(written.identity).id == again.id
    assert store.update_message(again.id, stats={"n": 1}).identity == again.identity
