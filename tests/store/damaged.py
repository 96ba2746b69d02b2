"""A real damaged ``hearth.db`` for the tests: conversations written through the store, then one page
of the messages table, in the middle of the file, overwritten with random bytes (as a failing disk
or a bad copy would leave it).

Which messages the damage took is found independently of the code under test: each message is
looked up by its rowid on its own (a point lookup reads only the pages on the way to that row),
so a message is *readable* exactly when its own page is.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from model_store.conversations import ConversationStore
from model_store.db import PAGE_SIZE, open_database

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
