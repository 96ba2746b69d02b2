"""Recovery keeps every row that can still be read (issue 32, point 5): a real ``hearth.db`` written
through the stores (48 messages in 8 conversations, some long enough for overflow pages, a model
snapshot after every answer), then truncated, a page zeroed, or random bytes written into a page.

What is recoverable is counted from the undamaged file with SQLite's ``dbstat`` (the pages each
row's cell lies on; :mod:`tests.store.damaged`), not with the code under test. Recovery must bring
back every such row, only genuine rows (each equal to the original but for the references the
recovery patches), and leave each conversation able to go on under its last recovered message.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from model_store.conversations import ConversationStore
from model_store.db import PAGE_SIZE, database_path, open_database
from model_store.recovery import recover_database
from tests.store.damaged import (
    ROW_KEYS, recoverable, row_pages, scramble_middle, table_pages, truncate, write_spread_conversations, zero_page,
)

# What recovery may change: a message whose earlier message was lost starts its branch, and its identity and
# those after it are made again from what the branch now holds (tests/store/test_recovery.py checks them).
PATCHED = {"messages": {"parent_id", "identity"}, "conversations": {"leaf_id", "updated_at"}}


def _middle(pages: list[int]) -> int:
    return pages[len(pages) // 2]


CASES = {  # name -> damage(path) -> the pages it damaged
    "truncated at 50%": lambda path: truncate(path, path.stat().st_size // 2),
    "truncated at 75%": lambda path: truncate(path, path.stat().st_size * 3 // 4),
    "truncated at 90%": lambda path: truncate(path, path.stat().st_size * 9 // 10),
    "truncated in the middle of a message page": lambda path: truncate(
        path, (_middle(table_pages(path, "messages", "leaf")) - 1) * PAGE_SIZE + PAGE_SIZE // 2),
    "a message leaf page zeroed": lambda path: zero_page(path, _middle(table_pages(path, "messages", "leaf"))),
    "the messages' interior page zeroed": lambda path: zero_page(path, table_pages(path, "messages", "internal")[0]),
    "page 1 (header and schema) zeroed": lambda path: zero_page(path, 1),
    "an overflow page of a long message zeroed": lambda path: zero_page(
        path, table_pages(path, "messages", "overflow")[0]),
    "random bytes over the middle of a message page": lambda path: scramble_middle(
        path, _middle(table_pages(path, "messages", "leaf"))),
}


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """The undamaged file, its rows by key, and the pages each row lies on."""
    path = database_path(tmp_path_factory.mktemp("original") / "data")
    write_spread_conversations(path, conversations=8, messages=6)
    try:
        pages = row_pages(path)
    except sqlite3.OperationalError as exc:  # SQLite built without dbstat
        pytest.skip(f"cannot count the recoverable rows: {exc}")
    return path, rows_by_key(path), pages


def rows_by_key(path) -> dict[str, dict[tuple, dict]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return {table: {tuple(row[k] for k in keys): dict(row) for row in conn.execute(f"SELECT * FROM {table}")}
                for table, keys in ROW_KEYS.items()}
    finally:
        conn.close()


def expected_rows(original_rows, pages, damaged: set[int]) -> dict[str, set[tuple]]:
    """Rows untouched by the damage; a snapshot (and its parts) only with its message and all of its
    parts: the recovery keeps only whole snapshots of recovered messages."""
    intact = {table: recoverable(pages[table], damaged) for table in ROW_KEYS}
    lost_parts = {key[0] for key in set(pages["snapshot_parts"]) - intact["snapshot_parts"]}
    snapshots = {key for key in intact["snapshots"] if key[0] not in lost_parts
                 and (original_rows["snapshots"][key]["message_id"],) in intact["messages"]}
    return {**intact, "snapshots": snapshots,
            "snapshot_parts": {key for key in intact["snapshot_parts"] if (key[0],) in snapshots}}


@pytest.mark.parametrize("case", list(CASES))
def test_recovery_keeps_every_row_that_can_be_read(original, tmp_path, case):
    source, original_rows, pages = original
    path = database_path(tmp_path / "data")
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    damaged = CASES[case](path)
    expected = expected_rows(original_rows, pages, damaged)
    assert expected["messages"], "the damage must leave some messages to recover"

    recovery = recover_database(path)

    got = rows_by_key(path)
    for table in ROW_KEYS:
        missing = expected[table] - set(got[table])
        assert not missing, f"{case}: {len(missing)} of {len(expected[table])} recoverable {table} rows lost"
        for key, row in got[table].items():
            assert key in original_rows[table], f"{case}: a {table} row that was never written: {key}"
            assert_genuine(table, row, original_rows[table][key], got)
    assert recovery.rows["messages"] == len(got["messages"])
    for (snapshot_id,) in got["snapshots"]:  # only whole snapshots are kept
        assert {k for k in got["snapshot_parts"] if k[0] == snapshot_id} == \
            {k for k in original_rows["snapshot_parts"] if k[0] == snapshot_id}
    assert_conversations_continue(path)


def assert_genuine(table: str, row: dict, was: dict, got: dict) -> None:
    """``row`` is the original one; only a reference to a lost row may have been patched."""
    if table == "conversations" and row["title"] == "Recovered conversation" and row["title"] != was["title"]:
        return  # its own row was lost; rebuilt for its messages
    for column, value in row.items():
        if column in PATCHED.get(table, ()):
            continue
        assert value == was[column], f"{table}.{column} differs from what was written"
    if table == "messages" and row["parent_id"] != was["parent_id"]:
        assert row["parent_id"] is None and (was["parent_id"],) not in got["messages"]


def assert_conversations_continue(path) -> None:
    """Each conversation shows its newest recovered message, and a new turn threads under it."""
    db = open_database(path)
    try:
        store = ConversationStore(db)
        for conversation in store.list():
            newest = db.execute("SELECT id FROM messages WHERE conversation_id = ? ORDER BY created_at DESC LIMIT 1",
                                [conversation.id]).fetchone()
            branch = store.current_branch(conversation.id)
            if newest is None:
                assert branch == []
                continue
            assert branch[-1].id == newest[0] and branch[0].parent_id is None
            added = store.add_message(conversation.id, "user", "Go on", parent_id=branch[-1].id)
            assert [m.id for m in store.current_branch(conversation.id)[-2:]] == [newest[0], added.id]
    finally:
        db.close()


def test_rows_committed_only_to_the_wal_are_recovered(tmp_path):
    """A crash leaves the newest turns in ``hearth.db-wal``: recovery reads them from there (the
    committed frames), with their final text, even when the main file is cut short."""
    path = database_path(tmp_path / "data")
    write_spread_conversations(path, conversations=3, messages=4)
    db = open_database(path)
    db.execute("PRAGMA wal_autocheckpoint = 0")
    store = ConversationStore(db)
    conversation = store.create("After the last checkpoint")
    question = store.add_message(conversation.id, "user", "Still there?", parent_id=None)
    answer = store.add_message(conversation.id, "assistant", "", parent_id=question.id, status="generating")
    store.update_message(answer.id, content="Yes, still here.", status="done")
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("hearth.db", "hearth.db-wal"):  # as a crash leaves them: no checkpoint
        shutil.copyfile(path.with_name(name), crashed / name)
    db.close()
    copy = crashed / "hearth.db"
    truncate(copy, copy.stat().st_size - PAGE_SIZE // 2)

    recover_database(copy)
    db = open_database(copy)
    try:
        branch = ConversationStore(db).current_branch(conversation.id)
        assert [(m.content, m.status) for m in branch] == [("Still there?", "done"), ("Yes, still here.", "done")]
    finally:
        db.close()
