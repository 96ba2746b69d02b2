"""Hostile ``hearth.db`` files for the recovery tests, each made from a real database written through
the stores and then changed the way an attacker would: schema rows holding other SQL, a leaf whose
cell pointers all alias one long cell, a header or ``-wal`` that claims billions of pages.

The ``-wal`` writer and the varint reader follow the documented format
(https://www.sqlite.org/fileformat2.html) on their own, not through the page reader under test.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

from model_store.conversations import ConversationStore
from model_store.db import PAGE_SIZE, open_database
from tests.store.damaged import table_pages

WAL_MAGIC_LE = 0x377F0682  # checksums in little-endian words
LONG_TEXT = 511 * 1024  # characters: a payload that needs an overflow chain of several 64 KiB pages


def write_chat(path: Path, conversations: int = 3, messages: int = 4, long_message: bool = False) -> list[str]:
    """A real database of a few short conversations (and one long message); the ids of the messages."""
    db = open_database(path)
    store, ids = ConversationStore(db), []
    for i in range(conversations):
        conversation = store.create(f"Hostile case {i}")
        parent = None
        for j in range(messages):
            text = f"message {i}.{j} " + ("long " * (LONG_TEXT // 5) if long_message and i == j == 0 else "words " * 40)
            parent = store.add_message(conversation.id, "user" if j % 2 == 0 else "assistant", text,
                                       parent_id=parent).id
            ids.append(parent)
    db.close()
    return ids


def add_schema_rows(path: Path, rows: list[tuple[str, str, str, int, str]]) -> None:
    """Insert ``(type, name, tbl_name, rootpage, sql)`` rows into the file's schema as they are."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        conn.executemany("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES (?, ?, ?, ?, ?)", rows)
        conn.commit()
    finally:
        conn.close()


LEAST_LOCAL = (PAGE_SIZE - 12) * 32 // 255 - 23  # the smallest part of a long payload kept on its leaf


def longest_cell(path: Path) -> tuple[int, int, int, int]:
    """(leaf page, cell pointer, payload size, rowid) of the messages row with the longest payload."""
    found = []
    for leaf in table_pages(path, "messages", "leaf"):
        page = read_page(path, leaf)
        for i in range(int.from_bytes(page[3:5], "big")):
            pointer = int.from_bytes(page[8 + 2 * i:10 + 2 * i], "big")
            size, after = _varint(page, pointer)
            found.append((size, leaf, pointer, _varint(page, after)[0]))
    size, leaf, pointer, rowid = max(found)
    return leaf, pointer, size, rowid


def keep_little_of_the_longest_on_its_leaf(path: Path) -> None:
    """Lengthen the longest message so that only :data:`LEAST_LOCAL` bytes of it stay on its leaf
    (§1.6: a payload whose remainder would overfill the leaf keeps the least), leaving the rest of the
    page for cell pointers."""
    _, _, size, rowid = longest_cell(path)
    grow = (PAGE_SIZE - 204 - (size - LEAST_LOCAL)) % (PAGE_SIZE - 4)  # a remainder past what fits
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE messages SET content = content || ? WHERE rowid = ?", ["x" * grow, rowid])
        conn.commit()
    finally:
        conn.close()


def alias_one_cell(path: Path, count: int) -> tuple[int, int]:
    """Rewrite the leaf of the longest message to hold that cell alone, with ``count`` cell pointers
    (as many as fit, when fewer) all pointing at it; the number of pointers written, and of the
    other cells the leaf held (their rows are gone)."""
    leaf, pointer, size, _ = longest_cell(path)
    page = read_page(path, leaf)
    after = _varint(page, _varint(page, pointer)[1])[1]
    cell = page[pointer:after + LEAST_LOCAL + 4]
    others = int.from_bytes(page[3:5], "big") - 1
    count = min(count, (PAGE_SIZE - len(cell) - 8) // 2)
    start = PAGE_SIZE - len(cell)
    image = bytearray(PAGE_SIZE)
    image[0], image[3:5], image[5:7] = 0x0D, count.to_bytes(2, "big"), start.to_bytes(2, "big")
    image[8:8 + 2 * count] = start.to_bytes(2, "big") * count
    image[start:] = cell
    with open(path, "r+b") as file:
        file.seek((leaf - 1) * PAGE_SIZE)
        file.write(image)
    return count, others


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = data[offset + i]
        if i == 8:
            return (value << 8) | byte, offset + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, offset + i + 1
    raise AssertionError("unreachable")


def claim_pages_in_header(path: Path, count: int) -> None:
    """Set the header's page count to ``count``, marked valid (version-valid-for = change counter)."""
    with open(path, "r+b") as file:
        file.seek(24)
        counter = file.read(4)
        file.seek(28)
        file.write(count.to_bytes(4, "big"))
        file.seek(92)
        file.write(counter)


def write_wal(path: Path, frames: list[tuple[int, int, bytes]], salts: tuple[int, int] = (0x1234, 0x5678)) -> Path:
    """A valid ``-wal`` beside ``path`` holding ``(page number, commit size, page bytes)`` frames."""
    header = struct.pack(">IIIIII", WAL_MAGIC_LE, 3007000, PAGE_SIZE, 0, *salts)
    sums = _checksum(header, (0, 0))
    out = [header + struct.pack(">II", *sums)]
    for number, commit, data in frames:
        head = struct.pack(">IIII", number, commit, *salts)
        sums = _checksum(data, _checksum(head[:8], sums))
        out.append(head + struct.pack(">II", *sums) + data)
    wal = path.with_name(path.name + "-wal")
    wal.write_bytes(b"".join(out))
    return wal


def _checksum(data: bytes, sums: tuple[int, int]) -> tuple[int, int]:
    s0, s1 = sums
    words = struct.unpack(f"<{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def read_page(path: Path, number: int) -> bytes:
    """Page ``number`` of the file, with zeros for what lies past its end."""
    with open(path, "rb") as file:
        file.seek((number - 1) * PAGE_SIZE)
        return file.read(PAGE_SIZE).ljust(PAGE_SIZE, b"\0")
