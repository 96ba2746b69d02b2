"""What can go wrong with the database file itself, in words a user can act on.

SQLite reports a damaged file, a read-only file or folder and a full disk as result codes on
``sqlite3`` exceptions. A full disk often shows as an I/O error instead (no room to create or grow
the WAL's ``-shm`` file), so an I/O error on a disk with less than :data:`ROOM_NEEDED` left is
reported as the full disk it is, with the space left and the space to free. :func:`storage_problem` turns those into one of the :class:`StoreError`
subclasses below, whose message says what happened, to which file, and what to do; every other
error is left as it is. :mod:`model_store.db` applies it to every write transaction and to opening
the file; the CLI and the GUI apply it to the reads they make.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path


class StoreError(Exception):
    """A store operation failed for a reason the user can act on; the message says how."""


class DatabaseDamaged(StoreError):
    """Parts of the database file cannot be read back (SQLite: "database disk image is malformed").

    Hearth stops writing to such a file, so nothing more is lost, and offers to copy what is still
    readable into a new one (``hearth db recover``, :mod:`model_store.recovery`).
    """

    def __init__(self, path: Path | None, detail: str) -> None:
        self.path, self.detail = path, " ".join(detail.split())
        super().__init__(
            f"the conversation database {_name(path)} is damaged ({self.detail}), so Hearth stopped writing to it; "
            "run `hearth db recover` to copy everything still readable into a new database (the damaged file "
            "is kept aside), or move it aside and Hearth will start a new one")


class DatabaseReadOnly(StoreError):
    """The database file or its folder cannot be written (permissions, a read-only disk)."""

    def __init__(self, path: Path | None, detail: str) -> None:
        self.path, self.detail = path, detail
        folder = f" and its folder {path.parent}" if path is not None else ""
        super().__init__(
            f"cannot save to {_name(path)}: the database or its folder is read-only ({detail}); give your user "
            f"write access to it{folder}, or choose another data folder in the settings. Conversations can "
            "still be listed and read")


class DiskFull(StoreError):
    """The disk holding the database has no room for the change (SQLite: "database or disk is full",
    or an I/O error while the disk has almost no space left); ``free``: the bytes it has left."""

    def __init__(self, path: Path | None, detail: str, free: int | None = None) -> None:
        self.path, self.detail = path, detail
        self.free = free if free is not None else free_space(path)
        folder = path.parent if path is not None else Path(".")
        left = f" ({size_text(self.free)} free)" if self.free is not None else ""
        wanted = (f"free at least {size_text(ROOM_NEEDED - self.free)}" if self.free is not None
                  and self.free < ROOM_NEEDED else "free some space")
        super().__init__(
            f"cannot save to {_name(path)}: the disk holding {folder} is full{left}; {wanted} on it and try again "
            f"({detail}). Nothing more is saved until then; everything saved before is intact, and conversations "
            "can still be listed and read")


# What a turn needs free on the database's disk: the WAL index (32 KiB) and a transaction's pages
# (64 KiB each) in the WAL. Below this, an I/O error on the database is the disk being full.
ROOM_NEEDED = 2_000_000


def free_space(path: Path | None) -> int | None:
    """Bytes this user may still write on the disk holding ``path`` (None if that cannot be told)."""
    if path is None or not hasattr(os, "statvfs"):
        return None
    folder = Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        found = os.statvfs(folder)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


def size_text(size: int) -> str:
    """``12 KB``, ``1.5 MB``, ``3 GB``: a size in the units a file manager shows (1000s)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}".replace(".0 ", " ") if value < 10 else f"{value:.0f} {unit}"
    return f"{size} bytes"


def disk_full(path: Path | None, detail: str) -> DiskFull | None:
    """A :class:`DiskFull` if the disk holding ``path`` has less than :data:`ROOM_NEEDED` left, else None."""
    free = free_space(path)
    return DiskFull(path, detail, free) if free is not None and free < ROOM_NEEDED else None


class DatabaseUnreachable(StoreError):
    """The file cannot be opened or read at all (a missing folder, an I/O error)."""

    def __init__(self, path: Path | None, detail: str) -> None:
        self.path, self.detail = path, detail
        where = f"; check that the folder {path.parent} exists and that you may write to it" if path else ""
        super().__init__(f"cannot use the conversation database {_name(path)} ({detail}){where}")


def storage_problem(exc: BaseException, path: Path | None) -> StoreError | None:
    """The :class:`StoreError` an ``sqlite3`` error stands for, or None for any other error.

    Args:
        exc: The error SQLite raised.
        path: The database file, for the message (None when unknown).
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    code, detail = _primary_code(exc), str(exc)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return DatabaseDamaged(path, detail)
    if code == sqlite3.SQLITE_READONLY:
        return DatabaseReadOnly(path, detail)
    if code == sqlite3.SQLITE_FULL:
        return DiskFull(path, detail)
    if code in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PERM):
        return disk_full(path, detail) or DatabaseUnreachable(path, detail)  # no room for the -shm or the WAL
    return None


def file_problem(exc: OSError, path: Path) -> StoreError:
    """The :class:`StoreError` a failed write of a file beside the database (``path``) stands for."""
    detail = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return DiskFull(path, detail)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return DatabaseReadOnly(path, detail)
    return DatabaseUnreachable(path, detail)


def _primary_code(exc: sqlite3.DatabaseError) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(exc).lower()  # raised by Python's module itself, without a result code
    if "malformed" in text or "not a database" in text:
        return sqlite3.SQLITE_CORRUPT
    if "readonly" in text or "read-only" in text:
        return sqlite3.SQLITE_READONLY
    if "disk is full" in text:
        return sqlite3.SQLITE_FULL
    return None


def _name(path: Path | None) -> str:
    return str(path) if path is not None else "hearth.db"
