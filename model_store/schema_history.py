"""Every table definition Hearth's migrations have ever written, for reading a damaged file's rows.

A damaged ``hearth.db`` is hostile input: its schema rows may hold any SQL (an ``ATTACH`` that
creates a file, a ``CREATE TABLE ... AS SELECT`` that calls functions or never ends). So recovery
never runs, attaches or builds SQL from them. It compares each schema row's text, as bytes, with the
texts Hearth's own migrations write: the schema of an empty database after each migration in turn,
built in memory from this code. A text found there gives that table's columns at that version (a
file written before ``ALTER TABLE ... DROP COLUMN`` keeps its old column order); any other text is
only a name and a root page, and its rows are read with the current shape.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import sqlite_utils

from model_store.migrations import MIGRATIONS, migrate

ColumnInfo = tuple[tuple, ...]  # the rows of PRAGMA table_info: (cid, name, type, notnull, default, pk)


@cache
def known_tables() -> dict[str, tuple[str, ColumnInfo]]:
    """Each ``CREATE TABLE`` text any migration has left in ``sqlite_schema`` -> (table, its columns)."""
    conn = sqlite3.connect(":memory:")
    db = sqlite_utils.Database(conn)
    known: dict[str, tuple[str, ColumnInfo]] = {}
    try:
        for step in MIGRATIONS:
            migrate(db, _plain_transaction, upto=step.name)
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'"):
                info = tuple(tuple(row) for row in conn.execute("SELECT * FROM pragma_table_info(?)", [name]))
                known.setdefault(sql, (name, info))
    finally:
        conn.close()
    return known


@contextmanager
def _plain_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    with db.conn:
        yield db
