"""Copying every row that can still be read out of a damaged database into a new one (``hearth db recover``).

SQLite itself gives up on a table, or the whole file, at the first bad page: a truncated file
fails even ``SELECT ... FROM sqlite_master``. So, like the ``sqlite3`` shell's ``.recover`` (which
is not always installed, needs a ``sqlite_dbpage`` that Python's SQLite may lack, and runs the
damaged file's schema SQL), this reads the file's pages itself (:mod:`model_store.page_reader`, :mod:`model_store.btree_cells`) and
keeps every row whose cell can be read in full, wherever it lies:

1. A new database is created beside the damaged file (``hearth.db.recovering-<time>``), with the
   current schema.
2. Every table's b-tree is walked from the root page the file's schema gives; leaves no tree
   reaches any more (a lost interior page, a lost page 1) are placed by the shape of their rows
   (:mod:`model_store.recovered_rows`). Each row goes in under the columns both schemas share.
3. What the lost rows leave dangling is patched so the copy holds together: messages whose
   conversation was lost get a "Recovered conversation"; a message whose parent was lost starts
   its branch; a conversation whose shown message was lost shows its newest one; documents and
   snapshots of lost messages, and snapshots whose earlier snapshot was lost, are dropped
   (snapshots only save time: the engine reads the conversation again instead).
4. The damaged file (with its ``-wal`` and ``-shm``) is renamed ``hearth.db.damaged-<time>`` and the
   new file takes its name. Nothing is deleted.

Close every Hearth window and command first: a process that still has the old file open keeps
writing to it, under its new name.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from model_store.db import open_database, write_transaction
from model_store.message_rows import refresh_identities
from model_store.page_reader import PageFile
from model_store.recovered_rows import RowFinder, table_shape
from model_store.state_files import FILE_PARTS

NOT_COPIED = ("_migrations", "writer_locks")  # the new file has its own; locks belong to running processes
BATCH_ROWS = 64  # rows per transaction (snapshot chunks are a megabyte each)


@dataclass
class Recovery:
    """What :func:`recover_database` did."""

    database: Path  # the new file, under the old name
    damaged_copy: Path  # where the damaged file is kept
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows copied
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> its pages that could not be read
    pages: dict[str, int] = field(default_factory=dict)  # what reading the file's pages met, by name
    repairs: list[str] = field(default_factory=list)  # what was patched, in words


def damage_found(path: Path) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the file at ``path`` (read only); None if nothing."""
    try:
        source = _open_source(path)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    try:
        found = [row[0] for row in source.execute("PRAGMA quick_check(10)")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        source.close()
    return None if found == ["ok"] else "; ".join(found)


def recover_database(path: Path, now: float | None = None) -> Recovery:
    """Copy every readable row of the database at ``path`` into a new file that takes its place.

    Args:
        path: The damaged database (usually ``hearth.db``).
        now: The time for the new names (default: now).

    Returns:
        What was copied, skipped and patched, and where the damaged file now is.

    Raises:
        OSError: If the new file cannot be written or the files cannot be renamed; the damaged
            file is then left where it was.
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    fresh = path.with_name(f"{path.name}.recovering-{stamp}")
    for leftover in _with_sidecars(fresh):
        leftover.unlink(missing_ok=True)
    recovery = Recovery(path, path.with_name(f"{path.name}.damaged-{stamp}"))
    target = open_database(fresh)
    try:
        target.execute("PRAGMA foreign_keys = OFF")  # rows arrive in any order; references are patched after
        _copy_readable(path, target, recovery)
        _patch_references(target, recovery)
        target.execute("PRAGMA foreign_keys = ON")
        problems = [row[0] for row in target.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"the recovered copy fails its own check: {'; '.join(problems[:3])}")
    finally:
        target.close()
    for old, aside in zip(_with_sidecars(path), _with_sidecars(recovery.damaged_copy)):
        if old.exists():
            old.rename(aside)
    fresh.rename(path)
    return recovery


def _with_sidecars(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _open_source(path: Path) -> sqlite3.Connection:
    """The damaged file, read only; ``immutable`` when SQLite cannot open its WAL index read-only.
    Its schema is not trusted: no view or trigger of it may call a function with side effects."""
    conn = _untrusting(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True))
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:  # not damage: the WAL index
        conn.close()
    except sqlite3.DatabaseError:  # damage: the quick check says what
        return conn
    return _untrusting(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True))


def _untrusting(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.execute("PRAGMA trusted_schema = OFF")
    return conn


def _copy_readable(path: Path, target: sqlite_utils.Database, recovery: Recovery) -> None:
    """Every row the page reader finds, into the table of ``target`` it belongs to."""
    known = {table: table_shape(target.conn, table) for table in target.table_names()}
    with PageFile(path) as pages:
        finder = RowFinder(pages, known)
        batch: list[dict[str, object]] = []
        table = None
        for found_in, row in finder.rows():
            if found_in in NOT_COPIED:
                continue
            if found_in != table or len(batch) >= BATCH_ROWS:
                _flush(target, table, batch, recovery)
                table, batch = found_in, []
            batch.append(row)
        _flush(target, table, batch, recovery)
    reading = finder.reading
    recovery.unreadable = {t: n for t, n in reading.unreadable.items() if t not in NOT_COPIED}
    recovery.pages = {"in_file": reading.pages, "missing": reading.pages_missing,
                      "cells_unreadable": reading.cells_unreadable, "rows_placed_by_shape": reading.placed_by_shape,
                      "leaves_not_placed": reading.pages_not_placed}
    if not reading.schema_readable:
        recovery.repairs.append("the file's list of tables could not be read, so rows were placed by their shape")


def _flush(target: sqlite_utils.Database, table: str | None, rows: list[dict[str, object]],
           recovery: Recovery) -> None:
    """Insert ``rows`` of ``table`` in one transaction, under the columns ``target`` has."""
    if table is None:
        return
    recovery.rows.setdefault(table, 0)
    columns = {column for row in rows for column in row} & set(table_shape(target.conn, table).columns)
    by_columns: dict[tuple[str, ...], list[tuple]] = {}
    for row in rows:  # a shorter record (written before a column was added) leaves that column's default
        names = tuple(c for c in row if c in columns)
        by_columns.setdefault(names, []).append(tuple(row[c] for c in names))
    for names, values in by_columns.items():
        insert = (f"INSERT OR IGNORE INTO {_quoted(table)} ({', '.join(_quoted(c) for c in names)})"
                  f" VALUES ({', '.join('?' * len(names))})")
        recovery.rows[table] += _insert(target, insert, values)


def _insert(target: sqlite_utils.Database, insert: str, rows: list[tuple]) -> int:
    """Insert ``rows``; the count inserted. A row the schema refuses (a snapshot whose message was
    lost, refused by m007's trigger) is left out, and the others still go in; a row whose key is
    already in (the same row found twice) is ignored."""
    if not rows:
        return 0
    before = target.conn.total_changes
    try:
        with write_transaction(target):
            target.conn.executemany(insert, rows)
        return target.conn.total_changes - before
    except sqlite3.IntegrityError:
        return sum(_insert_one(target, insert, row) for row in rows)


def _insert_one(target: sqlite_utils.Database, insert: str, row: tuple) -> int:
    try:
        with write_transaction(target):
            return target.execute(insert, row).rowcount
    except sqlite3.IntegrityError:
        return 0


def _patch_references(db: sqlite_utils.Database, recovery: Recovery) -> None:
    with write_transaction(db):
        _note(recovery, "conversation(s) whose row was lost were rebuilt as “Recovered conversation”", db.execute(
            "INSERT INTO conversations (id, title, model, settings, created_at, updated_at, leaf_id)"
            " SELECT conversation_id, 'Recovered conversation', 'default', '{}', min(created_at), max(created_at), NULL"
            " FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id"
        ).rowcount)
        orphans = [row[0] for row in db.execute(
            "SELECT id FROM messages WHERE parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM messages)")]
        db.conn.executemany("UPDATE messages SET parent_id = NULL WHERE id = ?", ([o] for o in orphans))
        for orphan in orphans:  # a new start of a branch: its identity, and those after it, no longer hold the lost one
            refresh_identities(db, orphan)
        _note(recovery, "message(s) whose earlier message was lost now start their branch", len(orphans))
        _note(recovery, "conversation(s) whose shown message was lost now show their newest one", db.execute(
            "UPDATE conversations SET leaf_id = (SELECT m.id FROM messages AS m WHERE m.conversation_id = conversations.id"
            " ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1)"
            " WHERE leaf_id IS NOT NULL AND leaf_id NOT IN (SELECT id FROM messages)"
            " OR leaf_id IS NULL AND EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = conversations.id)"
        ).rowcount)
        _note(recovery, "snapshot(s) missing some of their chunks were dropped", db.execute(
            "DELETE FROM snapshots WHERE EXISTS (SELECT 1 FROM json_each(snapshots.part_bytes) AS p"
            f" WHERE p.key NOT IN ({', '.join('?' * len(FILE_PARTS))})"  # files: checked as they are read
            " AND p.value != (SELECT coalesce(sum(length(c.data)), 0) FROM snapshot_parts AS c"
            " WHERE c.snapshot_id = snapshots.id AND c.part = p.key))", sorted(FILE_PARTS)).rowcount)
        dropped = 0
        while rows := db.execute("PRAGMA foreign_key_check").fetchall():  # documents, snapshots, their chunks
            before = dropped
            for table, rowid, _parent, _key in rows:
                dropped += db.execute(f"DELETE FROM {_quoted(table)} WHERE rowid = ?", [rowid]).rowcount
            if dropped == before:
                break
        _note(recovery, "document record(s) or snapshot(s) of lost messages were dropped", dropped)


def _note(recovery: Recovery, what: str, count: int) -> None:
    if count > 0:
        recovery.repairs.append(f"{count} {what}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
