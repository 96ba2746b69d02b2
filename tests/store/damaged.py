"""A real damaged ``hearth.db`` for the tests: conversations written through the store, then one page
of the messages table, in the middle of the file, overwritten with random bytes (as a failing disk
or a bad copy would leave it).

Which messages the damage took is found independently of the code under test: each message is
looked up by its rowid on its own (a point lookup reads only the pages on the way to that row),
so a message is *readable* exactly when its own page is.

For the damage cases of issue 32 (truncation, a zeroed page, random bytes in a page) the rows that
can be recovered are counted from the *undamaged* file with SQLite's own ``dbstat`` table, which
names the leaf page and the overflow pages of every b-tree: a row is recoverable when all the pages
holding its cell are untouched by the damage (:func:`row_pages`, :func:`recoverable`). That count
does not run any of the recovery code it checks.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from model_store.conversations import ConversationStore
from model_store.db import PAGE_SIZE, open_database
from model_store.snapshots import SnapshotStore

N_CONVERSATIONS = 40
N_MESSAGES = 30  # per conversation, alternating user and assistant, each the child of the one before


@dataclass(frozen=True)
class Damaged:
    path: Path
    conversation_ids: list[str]
    message_ids: list[str]
    readable_ids: set[str]  # messages whose page can still be read
    page: int  # the page that was overwritten

    @property
    def lost_ids(self) -> set[str]:
        return set(self.message_ids) - self.readable_ids


def make_damaged_database(path: Path, seed: int = 7) -> Damaged:
    conversation_ids, message_ids = write_conversations(path)
    page = middle_messages_page(path)
    damage_page(path, page, seed)
    readable = readable_messages(path)
    assert 0 < len(readable) < len(message_ids), "the damage must take some messages, not all"
    return Damaged(path, conversation_ids, message_ids, readable, page)


def damage_page(path: Path, page: int, seed: int = 7) -> None:
    """Overwrite page ``page`` (1-based) of the file with random bytes."""
    rng = random.Random(seed)
    with open(path, "r+b") as file:
        file.seek((page - 1) * PAGE_SIZE)
        file.write(bytes(rng.getrandbits(8) for _ in range(PAGE_SIZE)))


def write_conversations(path: Path) -> tuple[list[str], list[str]]:
    db = open_database(path)
    store = ConversationStore(db)
    conversation_ids, message_ids = [], []
    for i in range(N_CONVERSATIONS):
        conversation = store.create(f"Conversation {i}")
        conversation_ids.append(conversation.id)
        parent = None
        for j in range(N_MESSAGES):
            role = "user" if j % 2 == 0 else "assistant"
            parent = store.add_message(conversation.id, role, f"message {i}.{j} " + "words " * 90, parent_id=parent).id
            message_ids.append(parent)
    db.close()  # checkpoints the WAL into the file
    return conversation_ids, message_ids


def middle_messages_page(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        pages = [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' ORDER BY pageno")]
    finally:
        conn.close()
    assert len(pages) >= 5, pages
    return pages[len(pages) // 2]


def readable_messages(path: Path) -> set[str]:
    """The ids of the messages whose row can be read, each by a lookup of its own rowid."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        readable = set()
        for rowid in range(1, N_CONVERSATIONS * N_MESSAGES + 1):
            try:
                row = conn.execute("SELECT id FROM messages WHERE rowid = ?", [rowid]).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None:
                readable.add(row[0])
        return readable
    finally:
        conn.close()


# The keys that name a row of each table the damage cases check (rowids differ in the new file).
ROW_KEYS = {"conversations": ("id",), "messages": ("id",), "snapshots": ("id",),
            "snapshot_parts": ("snapshot_id", "part", "seq")}
LONG_MESSAGE = 150_000  # characters: the payload spans the leaf and two or more overflow pages
SNAPSHOT_BYTES = 100_000  # one per answer, so messages' pages are spread through the file as in use


def write_spread_conversations(path: Path, conversations: int = 4, messages: int = 6) -> None:
    """Conversations of ``messages`` turns each, some long enough for overflow pages, with a
    snapshot after every answer (as the app saves them), so message pages lie all through the file."""
    db = open_database(path)
    store, snapshots = ConversationStore(db), SnapshotStore(db)
    rng = random.Random(5)
    for i in range(conversations):
        conversation = store.create(f"Damage case {i}")
        parent = None
        for j in range(messages):
            size = LONG_MESSAGE if (i + j) % 7 == 3 else rng.randint(2_000, 20_000)
            role = "user" if j % 2 == 0 else "assistant"
            parent = store.add_message(conversation.id, role, f"turn {i}.{j} " + "lorem ipsum " * (size // 12),
                                       parent_id=parent).id
            if role == "assistant":
                snapshots.save(conversation_id=conversation.id, message_id=parent, identity=parent, parent_id=None, fingerprint="f",
                               format_version=1, n_tokens=j, kv_start=0, text="t", layout={},
                               parts={"prefill_tokens": rng.randbytes(SNAPSHOT_BYTES)})  # kept in the file
    db.close()


def row_pages(path: Path) -> dict[str, dict[tuple, set[int]]]:
    """For each table of :data:`ROW_KEYS`: each row's key -> the pages its cell lies on (its leaf and
    its overflow pages), from ``dbstat`` on the undamaged file. Leaves in b-tree order hold the rows
    in rowid order, ``ncell`` each; an overflow page's path is its leaf's path, the cell's index in
    hex, ``+`` and its place in the chain."""
    conn = sqlite3.connect(path)
    try:
        found = {}
        for table, keys in ROW_KEYS.items():
            pages = conn.execute("SELECT path, pageno, pagetype, ncell FROM dbstat WHERE name = ?", [table]).fetchall()
            leaves = sorted((p for p in pages if p[2] == "leaf"), key=lambda p: p[0])
            overflow: dict[tuple[str, int], set[int]] = {}
            for page_path, number, kind, _ in pages:
                if kind == "overflow":
                    leaf, cell = re.fullmatch(r"(.*/)([0-9a-f]+)\+[0-9a-f]+", page_path).groups()
                    overflow.setdefault((leaf, int(cell, 16)), set()).add(number)
            rows = conn.execute(f"SELECT {', '.join(keys)} FROM {table} ORDER BY rowid").fetchall()
            cells = [(leaf_path, number, i) for leaf_path, number, _, ncell in leaves for i in range(ncell)]
            assert len(cells) == len(rows), (table, len(cells), len(rows))
            found[table] = {row: {number} | overflow.get((leaf_path, i), set())
                            for row, (leaf_path, number, i) in zip(rows, cells)}
        return found
    finally:
        conn.close()


def recoverable(pages_of_rows: dict[tuple, set[int]], damaged_pages: set[int]) -> set[tuple]:
    """The rows none of whose pages the damage touched."""
    return {row for row, pages in pages_of_rows.items() if not pages & damaged_pages}


def table_pages(path: Path, table: str, kind: str) -> list[int]:
    """The pages of ``table`` of one kind (``leaf``, ``internal``, ``overflow``), in file order."""
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno", [table, kind])]
    finally:
        conn.close()


def truncate(path: Path, size: int) -> set[int]:
    """Cut the file to ``size`` bytes; the pages no longer wholly in it."""
    pages = -(-path.stat().st_size // PAGE_SIZE)
    os.truncate(path, size)
    return set(range(size // PAGE_SIZE + 1, pages + 1))


def zero_page(path: Path, page: int) -> set[int]:
    """Overwrite page ``page`` with zeros; the page damaged."""
    with open(path, "r+b") as file:
        file.seek((page - 1) * PAGE_SIZE)
        file.write(bytes(PAGE_SIZE))
    return {page}


def scramble_middle(path: Path, page: int, seed: int = 11) -> set[int]:
    """Overwrite the middle half of page ``page`` with random bytes; the page damaged."""
    with open(path, "r+b") as file:
        file.seek((page - 1) * PAGE_SIZE + PAGE_SIZE // 4)
        file.write(random.Random(seed).randbytes(PAGE_SIZE // 2))
    return {page}


def write_messages_then_snapshots(path: Path, conversations: int = 2, messages: int = 8) -> dict[str, str]:
    """``conversations`` x ``messages`` messages, then a large snapshot of each answer, so the end of
    the file holds only snapshot chunks. Returns each conversation's last message."""
    db = open_database(path)
    store, snapshots = ConversationStore(db), SnapshotStore(db)
    leaves, answers = {}, []
    for i in range(conversations):
        conversation = store.create(f"Kept {i}")
        parent = None
        for j in range(messages):
            parent = store.add_message(conversation.id, "user" if j % 2 == 0 else "assistant",
                                       f"message {i}.{j} " + "words " * 300, parent_id=parent).id
            answers += [(conversation.id, parent)] if j % 2 else []
        leaves[conversation.id] = parent
    rng = random.Random(3)
    for conversation_id, message_id in answers:
        snapshots.save(conversation_id=conversation_id, message_id=message_id, identity=message_id, parent_id=None, fingerprint="f",
                       format_version=1, n_tokens=1, kv_start=0, text="t", layout={},
                       parts={"prefill_tokens": rng.randbytes(SNAPSHOT_BYTES)})  # kept in the file
    db.close()
    return leaves


def last_page_of(path: Path, tables: tuple[str, ...]) -> int:
    """The last page in the file that holds any page of ``tables``."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT max(pageno) FROM dbstat WHERE name IN ({', '.join('?' * len(tables))})",
                            tables).fetchone()[0]
    finally:
        conn.close()
