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

When the file itself fails (:mod:`model_store.storage_problems`): opening checks the conversation
tables' pages first (``PRAGMA quick_check`` on each table but the snapshot chunks) and refuses a
damaged file before writing anything to it; a write that meets damage later marks the connection,
and every later write on it is refused. A read-only file or folder can still be opened for reading
(``read_only_ok``), and a full disk fails the one transaction, with a message that says so.
Opening writes nothing to an existing file (migrations run only when some are pending), and when
the disk has no room even for the WAL's index, ``read_only_ok`` opens the file for reading, so
conversations can still be listed and read on a full disk.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from model_store.db_health import (  # the health functions are part of this module's interface
    as_read_only, check_for_damage, damage_of, database_file, problem_of, read_only_problem, remember, write_refused,
)
from model_store.migrations import migrate, pending_migrations
from model_store.own_files import NotOwnFile, check_own_file, check_own_files, same_file
from model_store.private_files import make_private_folder, repair, touch_private
from model_store.state_files import StateFiles
from model_store.storage_problems import (  # StoreError and its kinds: store modules import them from here
    DatabaseDamaged, DatabaseReadOnly, DatabaseUnreachable, DiskFull, StoreError, disk_full, storage_problem,
)

log = logging.getLogger(__name__)

DATABASE_NAME = "hearth.db"
BUSY_TIMEOUT_MS = 10_000
# Large snapshot writes grow the WAL file; cap what stays on disk after a checkpoint.
JOURNAL_SIZE_LIMIT = 64 << 20
# Snapshot parts are megabyte blobs stored as chains of overflow pages; with SQLite's default 4 KiB
# pages a restore walks 256 pages per megabyte and reads about 4x slower than with 64 KiB pages.
# The size is fixed when a database file is created (existing files keep theirs).
PAGE_SIZE = 65536
# Test-only: no connection may grow the file past this many pages, so a write that needs one more
# fails the way a full disk does ("database or disk is full"). Set in tests, never by users.
MAX_PAGES_ENV = "HEARTH_TEST_DB_MAX_PAGES"
SIDECARS = ("-wal", "-shm", "-journal")  # the files SQLite opens by name beside the database


def database_path(data_dir: Path) -> Path:
    """Return where Hearth keeps its database inside ``data_dir``.

    Args:
        data_dir: Hearth's per-user data folder.

    Returns:
        ``data_dir / "hearth.db"``.
    """
    return Path(data_dir) / DATABASE_NAME


def open_database(path: Path, *, read_only_ok: bool = False, migrate: bool = True) -> sqlite_utils.Database:
    """Open (creating it if needed) the database at ``path`` and bring its schema up to date.

    Creates the parent folders, sets the connection's pragmas (WAL, foreign keys, a 10 s busy
    timeout, ``synchronous=NORMAL``), checks the conversation tables for damage and applies any
    pending migrations.

    Args:
        path: The database file, usually ``database_path(data_dir)``.
        read_only_ok: When the file or its folder cannot be written, open it for reading instead
            of failing (:func:`read_only_problem` then says why; every write is refused with it).
        migrate: Apply pending migrations (the app). False (the worker): a file whose schema is
            behind is refused with :class:`StoreError` instead, and nothing is written to it.

    Returns:
        An open ``sqlite_utils.Database``; the caller closes it.

    Raises:
        NotOwnFile: If the file or one of its ``-wal``/``-shm``/``-journal`` files is a symbolic link
            or belongs to another user (:mod:`model_store.own_files`); nothing was opened.
        DatabaseDamaged: If the file is not an SQLite database or is damaged; nothing was written.
        DatabaseReadOnly: If it cannot be written and ``read_only_ok`` is false (or it does not exist).
        StoreError: If the file cannot be opened or created at all.
    """
    path = Path(path)
    try:
        check_own_files([path, *sidecars(path)])
        return _open_for_writing(path, migrate)
    except DiskFull as problem:  # no room for the WAL's -shm file: read the file as it is
        if not read_only_ok or not path.is_file():
            raise
        return _open_for_reading(path, problem)
    except (DatabaseReadOnly, DatabaseUnreachable) as problem:
        read_only = as_read_only(path, problem)
        if read_only is None:
            raise
        if not read_only_ok:
            raise read_only from problem
        return _open_for_reading(path, read_only)
    except OSError as exc:  # the folder cannot be created
        detail = exc.strerror or str(exc)
        raise (disk_full(path, detail) or DatabaseUnreachable(path, detail)) from exc


def _open_for_writing(path: Path, migrate_schema: bool) -> sqlite_utils.Database:
    path = Path(path)
    why_not = write_refused(path)
    if why_not is not None:  # SQLite would open it and fail only at the first write
        raise DatabaseReadOnly(path, why_not)
    make_private_folder(path.parent)
    touch_private(path)  # 0600 before SQLite opens it: SQLite gives the -wal and -shm files its mode
    repair(sidecars(path))
    StateFiles.of_database(path).repair()  # and the snapshots' state files beside it
    checked = check_own_file(path)  # the file SQLite is about to open, as it is now (created just above)
    try:
        db = sqlite_utils.Database(path, execute_plugins=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from exc
    remember(db, path)
    try:
        _still_own(path, checked)
        _configure(db)
        check_own_files(sidecars(path))  # SQLite opens the -wal and -shm by name
        check_for_damage(db)  # before migrate: a damaged file is never written to
        if migrate_schema:
            migrate(db, write_transaction)
        elif pending := pending_migrations(db):
            raise StoreError(f"the conversation database {path} is older than this engine ({len(pending)} "
                             "update(s) pending); start Hearth or any hearth command once to update it")
    except sqlite3.DatabaseError as exc:
        db.close()
        problem = storage_problem(exc, path)
        if problem is None:
            raise
        raise problem from exc
    except BaseException:
        db.close()
        raise
    return db


def sidecars(path: Path) -> list[Path]:
    """The ``-wal``, ``-shm`` and ``-journal`` files of the database ``path``."""
    return [path.with_name(path.name + suffix) for suffix in SIDECARS]


def _still_own(path: Path, checked: os.stat_result | None) -> None:
    """Refuse a file swapped for a link or another file between the check and SQLite's open."""
    if checked is None or not same_file(checked, path):
        raise NotOwnFile(path, "it was replaced by another file while Hearth opened it",
                         "Check who else can write to its folder, and start again.")


def _open_for_reading(path: Path, why: DatabaseReadOnly | DiskFull) -> sqlite_utils.Database:
    """The file opened read-only. Without write access, or without room on the disk, SQLite cannot
    create the WAL's ``-shm`` file; ``immutable=1`` then reads the file as it is (nobody can be
    writing it: it cannot be written). Every write on the connection is refused with ``why``."""
    last: sqlite3.Error | None = None
    for options in ("mode=ro", "mode=ro&immutable=1"):
        checked = check_own_file(path)
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?{options}", uri=True, check_same_thread=False)
        db = sqlite_utils.Database(conn, execute_plugins=False)
        remember(db, path, read_only=why)
        try:
            _still_own(path, checked)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            check_for_damage(db)
            return db
        except sqlite3.DatabaseError as exc:
            db.close()
            last = exc
            if isinstance(storage_problem(exc, path), DatabaseDamaged):
                break
        except BaseException:
            db.close()
            raise
    problem = storage_problem(last, path) or DatabaseUnreachable(path, str(last))
    raise problem from last


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
    max_pages = os.environ.get(MAX_PAGES_ENV)
    if max_pages:
        db.execute(f"PRAGMA max_page_count = {int(max_pages)}")


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


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run a block as one write transaction (``BEGIN IMMEDIATE``), committed on success.

    Nested use becomes a savepoint of the enclosing transaction. Any exception rolls the block
    back and propagates; a damaged file, a read-only one and a full disk propagate as the
    :mod:`model_store.storage_problems` error that says so.

    Args:
        db: The database.

    Yields:
        The same database.

    Raises:
        DatabaseDamaged: If the file was found damaged (now or earlier): nothing is written.
        DatabaseReadOnly: If the file was opened for reading only, or cannot be written.
        DiskFull: If the disk has no room for the change.
    """
    refused = damage_of(db) or read_only_problem(db)
    if refused is not None:
        raise refused
    try:
        with _transaction(db):
            yield db
    except sqlite3.DatabaseError as exc:
        problem = problem_of(db, exc)
        if problem is None:
            raise
        raise problem from exc


@contextmanager
def _transaction(db: sqlite_utils.Database) -> Iterator[None]:
    conn = db.conn
    if conn.in_transaction:
        name = f"hearth_{secrets.token_hex(8)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
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
