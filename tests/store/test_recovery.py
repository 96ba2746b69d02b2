"""A damaged database file: refused before anything is written to it, and recovered row by row into a
new file with every readable row, the damaged file kept aside unchanged."""

from __future__ import annotations

import sqlite3

import pytest

from model_store.conversations import ConversationStore
from model_store.message_identity import branch_identities
from model_store.db import DatabaseDamaged, damage_of, database_path, open_database, problem_of, write_transaction
from model_store.recovery import damage_found, recover_database
from model_store.snapshots import SnapshotStore
from tests.store.damaged import (
    damage_page, make_damaged_database, middle_messages_page, readable_messages, write_conversations,
)


@pytest.fixture
def damaged(tmp_path):
    return make_damaged_database(database_path(tmp_path / "data"))


def test_opening_a_damaged_file_is_refused_and_writes_nothing(damaged):
    before = damaged.path.read_bytes()
    with pytest.raises(DatabaseDamaged) as refused:
        open_database(damaged.path)
    message = str(refused.value)
    assert "damaged" in message and str(damaged.path) in message and "hearth db recover" in message
    assert "\n" not in message
    assert damaged.path.read_bytes() == before


def test_damage_met_after_opening_stops_every_later_write(tmp_path):
    path = database_path(tmp_path / "data")
    write_conversations(path)
    db = open_database(path)  # healthy when opened; then a page goes bad under it
    store = ConversationStore(db)
    damage_page(path, middle_messages_page(path))
    db.execute("PRAGMA shrink_memory")  # forget the pages read so far: read them from the file again
    with pytest.raises(sqlite3.DatabaseError) as met:
        store.list("needle")  # a search reads every message
    before = path.read_bytes()

    problem = problem_of(db, met.value)
    assert isinstance(problem, DatabaseDamaged) and damage_of(db) is problem
    with pytest.raises(DatabaseDamaged):
        store.create("after the damage")
    with pytest.raises(DatabaseDamaged):
        with write_transaction(db):
            pass
    db.close()
    assert path.read_bytes() == before


def test_recovery_copies_every_readable_row_and_keeps_the_damaged_file_aside(damaged):
    before = damaged.path.read_bytes()
    assert damage_found(damaged.path) is not None
    recovery = recover_database(damaged.path)

    assert recovery.database == damaged.path
    assert recovery.damaged_copy.name.startswith("hearth.db.damaged-")
    assert recovery.damaged_copy.read_bytes() == before
    assert damage_found(damaged.path) is None
    db = open_database(damaged.path)
    store = ConversationStore(db)
    stored = {row[0] for row in db.execute("SELECT id FROM messages")}
    assert stored == damaged.readable_ids
    assert recovery.rows["messages"] == len(damaged.readable_ids)
    assert {c.id for c in store.list()} == set(damaged.conversation_ids)
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    emptied = 0
    for conversation_id in damaged.conversation_ids:  # every conversation shows a branch that holds together
        branch = store.current_branch(conversation_id)
        if not branch:  # every one of its messages was on the damaged page; its title is kept
            assert not any(m for m in stored if store.message(m).conversation_id == conversation_id)
            emptied += 1
            continue
        assert all(m.id in damaged.readable_ids for m in branch)
        assert branch[0].parent_id is None
        assert all(child.parent_id == parent.id for parent, child in zip(branch, branch[1:]))
        # each branch's identities are those of what it now holds, from its new start
        assert [m.identity for m in branch] == branch_identities((m.role, m.content, m.reasoning, m.tool_part) for m in branch)
    assert emptied < len(damaged.conversation_ids) // 2
    assert any("start their branch" in repair for repair in recovery.repairs)
    new = store.create("after recovery")  # the app works on the result
    store.add_message(new.id, "user", "hello again", parent_id=None)
    db.close()


def test_snapshots_of_lost_messages_are_dropped_and_the_others_kept(tmp_path):
    path = database_path(tmp_path / "data")
    _, message_ids = write_conversations(path)
    db = open_database(path)
    snapshots = SnapshotStore(db)
    store = ConversationStore(db)
    saved = {}
    for message_id in message_ids[::7]:
        message = store.message(message_id)
        saved[message_id] = snapshots.save(
            conversation_id=message.conversation_id, message_id=message_id, identity=message.identity, parent_id=None, fingerprint="f",
            format_version=1, n_tokens=3, kv_start=0, text="t", layout={}, parts={"kv": b"x" * 1000}).id
    db.close()
    damage_page(path, middle_messages_page(path))
    readable = readable_messages(path)
    recover_database(path)
    db = open_database(path)
    kept = {row[0] for row in db.execute("SELECT message_id FROM snapshots")}
    assert kept == {m for m in saved if m in readable} and kept != set(saved)
    for message_id in kept:
        record = SnapshotStore(db).get(saved[message_id])
        assert bytes(SnapshotStore(db).read_part(record.id, "kv")) == b"x" * 1000
    db.close()


def test_a_healthy_file_is_not_damaged(tmp_path):
    path = database_path(tmp_path / "data")
    open_database(path).close()
    assert damage_found(path) is None
