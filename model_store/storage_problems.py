"""What can go wrong with the database file itself, in words a user can act on.

SQLite reports a damaged file, a read-only file or folder and a full disk as result codes on
``sqlite3`` exceptions. :func:`storage_problem` turns those into one of the :class:`StoreError`
subclasses below, whose message says what happened, to which file, and what to do; every other
error is left as it is. :mod:`model_store.db` applies it to every write transaction and to opening
the file; the CLI and the GUI apply it to the reads they make.
"""

from __future__ import annotations

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
    """The disk holding the database has no room for the change (SQLite: "database or disk is full")."""

    def __init__(self, path: Path | None, detail: str) -> None:
        self.path, self.detail = path, detail
        super().__init__(
            f"cannot save to {_name(path)}: the disk is full ({detail}); free some space on it and try again. "
            "This change was not saved; everything saved before it is intact")


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
        return DatabaseUnreachable(path, detail)
    return None


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
