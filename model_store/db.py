"""Opening Hearth's SQLite database, and the transaction helpers every store module uses.

Several processes share one database file: the app writes conversations and messages while the
engine's worker process writes state snapshots. That is safe because:

* the file is in WAL mode, so readers never block the writer and the writer never blocks readers;
* every write goes through :func:`write_transaction`, which starts with ``BEGIN IMMEDIATE``. A
  deferred transaction that reads first and writes later can fail at once with "database is
  locked" when another process committed in between (SQLite cannot wait in that case); an
  immediate one takes the write lock up front and so waits up to ``busy_timeout`` instead;
* reads that span several statements use :func:`read_transaction`, so they see one consistent
  snapshot of the file even while the other process commits.

A process killed in the middle of a transaction leaves only uncommitted WAL frames behind, which
SQLite ignores when the file is next opened: a transaction is applied whole or not at all.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

log = logging.getLogger(__name__)

DATABASE_NAME = "hearth.db"
BUSY_TIMEOUT_MS = 10_000
# Large snapshot writes grow the WAL file; cap what stays on disk after a checkpoint.
JOURNAL_SIZE_LIMIT = 64 << 20
# Snapshot parts are megabyte blobs stored as chains of overflow pages; with SQLite's default 4 KiB
# pages a restore walks 256 pages per megabyte and reads about 4x slower than with 64 KiB pages.
# The size is fixed when a database file is created (existing files keep theirs).
PAGE_SIZE = 65536


class StoreError(Exception):
    """A store operation failed for a reason the user can act on; the message says how."""


def database_path(data_dir: Path) -> Path:
    """Return where Hearth keeps its database inside ``data_dir``.

    Args:
        data_dir: Hearth's per-user data folder.

    Returns:
        ``data_dir / "hearth.db"``.
    """
    return Path(data_dir) / DATABASE_NAME


def open_database(path: Path) -> sqlite_utils.Database:
    """Open (creating it if needed) the database at ``path`` and bring its schema up to date.

    Creates the parent folders, sets the connection's pragmas (WAL, foreign keys, a 10 s busy
    timeout, ``synchronous=NORMAL``) and applies any pending migrations.

    Args:
        path: The database file, usually ``database_path(data_dir)``.

    Returns:
        An open ``sqlite_utils.Database``; the caller closes it.

    Raises:
        StoreError: If the file cannot be opened, is not an SQLite database or is damaged.
    """
    from model_store.migrations import migrate  # migrations imports this module

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite_utils.Database(path, execute_plugins=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from exc
    try:
        _configure(db)
        migrate(db)
    except sqlite3.DatabaseError as exc:
        db.close()
        if _is_damaged(exc):
            raise StoreError(
                f"{path} is not a usable Hearth database ({exc}); move it aside; "
                "Hearth will create a new one"
            ) from exc
        raise
    except BaseException:
        db.close()
        raise
    return db


def _configure(db: sqlite_utils.Database) -> None:
    # busy_timeout first: switching to WAL needs a brief exclusive lock another process may hold.
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # takes effect only on a new, empty file
    mode = _switch_to_wal(db)
    if str(mode).lower() != "wal":
        log.warning("%s: WAL mode unavailable (journal_mode=%s)", db.conn, mode)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")


def _switch_to_wal(db: sqlite_utils.Database) -> str:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the file: SQLite answers
    "database is locked" at once, without its busy handler, when two connections make a new file's
    first switch together. Once the file is in WAL mode the pragma takes no lock at all."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return str(db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run a block as one write transaction (``BEGIN IMMEDIATE``), committed on success.

    Nested use becomes a savepoint of the enclosing transaction. Any exception rolls the block
    back and propagates.

    Args:
        db: The database.

    Yields:
        The same database.
    """
    conn = db.conn
    if conn.in_transaction:
        name = f"hearth_{secrets.token_hex(8)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield db
        except BaseException:
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
        conn.execute("COMMIT")
    except BaseException:  # the block or the commit failed: undo everything
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextmanager
def read_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run several reads against one consistent snapshot of the file.

    Inside an enclosing transaction this does nothing extra. Do not write inside it: upgrading
    a deferred transaction to a write can fail at once with "database is locked".

    Args:
        db: The database.

    Yields:
        The same database.
    """
    conn = db.conn
    if conn.in_transaction:
        yield db
        return
    conn.execute("BEGIN")
    try:
        yield db
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def ancestors(db: sqlite_utils.Database, table: str, columns: str, start_id: str) -> list[tuple]:
    """Rows of ``table`` from ``start_id`` up its ``parent_id`` links, the start first.

    Args:
        db: The database.
        table: A table with ``id`` and ``parent_id`` columns (messages, snapshots).
        columns: The columns to select, as SQL.
        start_id: Where to start.

    Returns:
        The rows, nearest first; empty if ``start_id`` is not in the table.
    """
    return db.execute(
        f"""WITH RECURSIVE up(id, depth) AS (
               SELECT id, 0 FROM {table} WHERE id = ?
               UNION ALL
               SELECT t.parent_id, up.depth + 1 FROM {table} AS t JOIN up ON t.id = up.id
               WHERE t.parent_id IS NOT NULL
           )
           SELECT {columns} FROM up JOIN {table} USING (id) ORDER BY up.depth""",
        [start_id],
    ).fetchall()


def to_json(value: Any) -> str:
    """Encode a JSON column value (compact, keys kept in insertion order)."""
    return json.dumps(value, separators=(",", ":"))


def from_json(text: str | None) -> Any:
    """Decode a JSON column value; ``NULL`` or an empty string becomes ``{}``."""
    return json.loads(text) if text else {}
