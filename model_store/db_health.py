"""What Hearth knows about an open database file beyond SQLite's connection: which file it is,
whether it was opened for reading only and why, and whether it was found damaged.

:func:`model_store.db.open_database` records each connection here; :func:`check_for_damage` runs
when a file is opened, :func:`problem_of` whenever a read or a write fails, and
:func:`model_store.db.write_transaction` refuses to write once a connection's file is known to be
damaged, so nothing more is written to it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from weakref import WeakKeyDictionary

import sqlite_utils

from model_store.storage_problems import (
    DatabaseDamaged, DatabaseReadOnly, DatabaseUnreachable, StoreError, storage_problem,
)

# Checked when a file is opened: every table but the snapshot chunks, which can be gigabytes of
# blobs; the snapshot store checks those itself, part by part, with checksums.
NOT_CHECKED_AT_OPEN = ("snapshot_parts",)


@dataclass
class _FileState:
    path: Path
    read_only: DatabaseReadOnly | None = None  # opened for reading only, and why
    damaged: DatabaseDamaged | None = None  # found damaged: every later write is refused


_STATE: WeakKeyDictionary[sqlite_utils.Database, _FileState] = WeakKeyDictionary()


def remember(db: sqlite_utils.Database, path: Path, read_only: DatabaseReadOnly | None = None) -> None:
    """Record that ``db`` is the file ``path`` (opened for reading only when ``read_only`` says why)."""
    _STATE[db] = _FileState(path, read_only)


def check_for_damage(db: sqlite_utils.Database) -> None:
    """``PRAGMA quick_check`` of every table but the snapshot chunks (milliseconds for thousands of messages).

    Raises:
        DatabaseDamaged: If a page of one of them cannot be read; the connection refuses writes from then on.
    """
    names = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
             if name not in NOT_CHECKED_AT_OPEN]
    for name in names:
        found = [row[0] for row in db.execute(f"PRAGMA quick_check({_quoted(name)})")]
        if found != ["ok"]:
            first = next(line for line in "\n".join(found).splitlines() if line and not line.startswith("***"))
            raise _mark_damaged(db, f"PRAGMA quick_check: the table {name} has unreadable pages; {first}")


def problem_of(db: sqlite_utils.Database, exc: BaseException) -> StoreError | None:
    """The user-facing problem behind an error a read or write on ``db`` raised (None: not a storage problem).

    A "malformed" error is confirmed with a full ``PRAGMA quick_check``; once confirmed, the
    connection refuses every later write.
    """
    if isinstance(exc, StoreError):
        return exc
    problem = storage_problem(exc, database_file(db))
    if not isinstance(problem, DatabaseDamaged):
        return problem
    try:
        found = [row[0] for row in db.execute("PRAGMA quick_check(10)")]
    except sqlite3.DatabaseError as check_failed:
        found = [str(check_failed)]
    if found == ["ok"]:  # nothing wrong on disk: a fault on the way (memory, the disk's cable); not sticky
        return DatabaseUnreachable(database_file(db), f"{exc}; PRAGMA quick_check finds the file intact")
    return _mark_damaged(db, str(exc))


def _mark_damaged(db: sqlite_utils.Database, detail: str) -> DatabaseDamaged:
    state = _state(db)
    if state.damaged is None:
        state.damaged = DatabaseDamaged(state.path, detail)
    return state.damaged


def database_file(db: sqlite_utils.Database) -> Path | None:
    """The file ``db`` was opened from by ``open_database`` (None for other databases)."""
    state = _STATE.get(db)
    return state.path if state is not None else None


def read_only_problem(db: sqlite_utils.Database) -> DatabaseReadOnly | None:
    """Why ``db`` was opened for reading only (see ``open_database(read_only_ok=True)``), or None."""
    state = _STATE.get(db)
    return state.read_only if state is not None else None


def damage_of(db: sqlite_utils.Database) -> DatabaseDamaged | None:
    """The damage found on ``db`` so far, or None."""
    state = _STATE.get(db)
    return state.damaged if state is not None else None


def _state(db: sqlite_utils.Database) -> _FileState:
    state = _STATE.get(db)
    if state is None:
        state = _STATE[db] = _FileState(Path(":memory:"))
    return state


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def write_refused(path: Path) -> str | None:
    """Why this process may not write the file (or create its ``-wal``/``-shm`` beside it); None if it may."""
    if path.exists() and not os.access(path, os.W_OK):
        return f"no permission to write {path.name}"
    sidecars = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if path.parent.is_dir() and not os.access(path.parent, os.W_OK) \
            and not all(s.exists() and os.access(s, os.W_OK) for s in sidecars):
        return f"no permission to create files in {path.parent}"
    return None


def as_read_only(path: Path, problem: StoreError) -> DatabaseReadOnly | None:
    """A file that exists but cannot be written, or sits in a folder that cannot be: SQLite needs to
    create the ``-wal`` and ``-shm`` files beside it, and says only "unable to open" when it cannot."""
    if isinstance(problem, DatabaseReadOnly):
        return problem
    if path.is_file() and not os.access(path.parent, os.W_OK):
        return DatabaseReadOnly(path, f"{problem.detail}: the folder {path.parent} cannot be written")
    return None
