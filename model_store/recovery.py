"""Copying what can still be read out of a damaged database into a new one (``hearth db recover``).

SQLite's own ``.recover`` lives in the ``sqlite3`` shell, which is not always installed, so this
copies row by row with Python's ``sqlite3`` module, which always is:

1. A new database is created beside the damaged file (``hearth.db.recovering-<time>``), with the
   current schema.
2. Every table is walked in rowid order. When a page cannot be read, the walk jumps past it: it
   probes ever further rowids until a seek works, then bisects back to the first rowid after the
   damaged stretch, so every row on a readable page is copied and only the unreadable pages' rows
   are lost.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from model_store.db import open_database, write_transaction

NOT_COPIED = ("_migrations", "writer_locks")  # the new file has its own; locks belong to running processes
LOWEST_ROWID, HIGHEST_ROWID = -(1 << 63), (1 << 63) - 1
BATCH_ROWS = 64  # rows per transaction (snapshot chunks are a megabyte each)


@dataclass
class Recovery:
    """What :func:`recover_database` did."""

    database: Path  # the new file, under the old name
    damaged_copy: Path  # where the damaged file is kept
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows copied
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> damaged stretches skipped
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
    """The damaged file, read only; ``immutable`` when SQLite cannot open its WAL index read-only."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:  # not damage: the WAL index
        conn.close()
    except sqlite3.DatabaseError:  # damage: met again, table by table, by the caller
        return conn
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def _copy_readable(path: Path, target: sqlite_utils.Database, recovery: Recovery) -> None:
    source = _open_source(path)
    try:
        try:
            tables = {name for (name,) in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            recovery.repairs.append(f"the file's list of tables cannot be read ({exc}), so nothing could be copied")
            return
        for table in target.table_names():
            if table in NOT_COPIED or table not in tables:
                continue
            columns = _shared_columns(source, target, table)
            recovery.rows[table], recovery.unreadable[table] = _copy_table(source, target, table, columns)
    finally:
        source.close()


def _shared_columns(source: sqlite3.Connection, target: sqlite_utils.Database, table: str) -> list[str]:
    theirs = [row[1] for row in source.execute(f"PRAGMA table_info({_quoted(table)})")]
    ours = {row[1] for row in target.execute(f"PRAGMA table_info({_quoted(table)})")}
    return [column for column in theirs if column in ours]


def _copy_table(source: sqlite3.Connection, target: sqlite_utils.Database, table: str,
                columns: list[str]) -> tuple[int, int]:
    names = ", ".join(_quoted(c) for c in columns)
    insert = f"INSERT OR IGNORE INTO {_quoted(table)} ({names}) VALUES ({', '.join('?' * len(columns))})"
    walk = _RowWalk(source, table, names)
    copied, batch = 0, []
    for row in walk.rows():
        batch.append(row)
        if len(batch) >= BATCH_ROWS:
            copied += _insert(target, insert, batch)
            batch = []
    copied += _insert(target, insert, batch)
    return copied, walk.skipped


def _insert(target: sqlite_utils.Database, insert: str, rows: list[tuple]) -> int:
    """Insert ``rows``; the count inserted. A row the schema refuses (a snapshot whose message was
    lost, refused by m007's trigger) is left out, and the others still go in."""
    if not rows:
        return 0
    try:
        with write_transaction(target):
            target.conn.executemany(insert, rows)
        return len(rows)
    except sqlite3.IntegrityError:
        return sum(_insert_one(target, insert, row) for row in rows)


def _insert_one(target: sqlite_utils.Database, insert: str, row: tuple) -> int:
    try:
        with write_transaction(target):
            target.execute(insert, row)
        return 1
    except sqlite3.IntegrityError:
        return 0


class _RowWalk:
    """A table's rows in rowid order, stepping over the rowids of pages that cannot be read."""

    def __init__(self, source: sqlite3.Connection, table: str, columns: str) -> None:
        self.source, self.table, self.columns = source, _quoted(table), columns
        self.skipped = 0

    def rows(self) -> Iterator[tuple]:
        low: int | None = LOWEST_ROWID
        select = f"SELECT rowid, {self.columns} FROM {self.table} WHERE rowid >= ? ORDER BY rowid"
        while low is not None:
            try:
                for row in self.source.execute(select, [low]):
                    low = row[0] + 1
                    yield row[1:]
                return
            except sqlite3.DatabaseError:
                pass
            # Python's cursor reads one row ahead, so the last rows before the damage may not have
            # come out: go on one row per query (LIMIT 1 reads no further) up to the damage.
            while True:
                try:
                    row = self.source.execute(select + " LIMIT 1", [low]).fetchone()
                except sqlite3.DatabaseError:
                    break
                if row is None:
                    return
                low = row[0] + 1
                yield row[1:]
            self.skipped += 1
            low = self._first_readable_after(low)

    def _seeks(self, rowid: int) -> bool:
        try:
            self.source.execute(f"SELECT rowid FROM {self.table} WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                                [rowid]).fetchone()
            return True
        except sqlite3.DatabaseError:
            return False

    def _first_readable_after(self, bad: int) -> int | None:
        """The lowest rowid above ``bad`` from which a seek works (None: none does)."""
        step = 1
        while True:
            good = min(bad + step, HIGHEST_ROWID)
            if self._seeks(good):
                break
            if good == HIGHEST_ROWID:
                return None
            bad, step = good, step * 2
        while good - bad > 1:
            middle = (bad + good) // 2
            if self._seeks(middle):
                good = middle
            else:
                bad = middle
        return good


def _patch_references(db: sqlite_utils.Database, recovery: Recovery) -> None:
    with write_transaction(db):
        _note(recovery, "conversation(s) whose row was lost were rebuilt as “Recovered conversation”", db.execute(
            "INSERT INTO conversations (id, title, model, settings, created_at, updated_at, leaf_id)"
            " SELECT conversation_id, 'Recovered conversation', 'default', '{}', min(created_at), max(created_at), NULL"
            " FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id"
        ).rowcount)
        _note(recovery, "message(s) whose earlier message was lost now start their branch", db.execute(
            "UPDATE messages SET parent_id = NULL"
            " WHERE parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM messages)").rowcount)
        _note(recovery, "conversation(s) whose shown message was lost now show their newest one", db.execute(
            "UPDATE conversations SET leaf_id = (SELECT m.id FROM messages AS m WHERE m.conversation_id = conversations.id"
            " ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1)"
            " WHERE leaf_id IS NOT NULL AND leaf_id NOT IN (SELECT id FROM messages)"
            " OR leaf_id IS NULL AND EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = conversations.id)"
        ).rowcount)
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
