"""A cache of file SHA-256 digests, so multi-gigabyte model files are hashed once.

Rows in ``file_hashes`` are keyed by the resolved path and remember the size and ``mtime_ns`` the
digest was computed for; a file whose size or modification time changed is hashed again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import sqlite_utils

from model_store.db import write_transaction

READ_BYTES = 8 << 20


def file_sha256(db: sqlite_utils.Database, path: Path) -> str:
    """Return the hex SHA-256 of a file, from the cache when the file is unchanged.

    Args:
        db: The database holding the cache.
        path: The file.

    Returns:
        The lowercase hex digest.

    Raises:
        OSError: If the file cannot be read.
    """
    resolved = Path(path).resolve()
    key = str(resolved)
    before = resolved.stat()
    row = db.execute(
        "SELECT size, mtime_ns, sha256 FROM file_hashes WHERE path = ?", [key]
    ).fetchone()
    if row is not None and tuple(row[:2]) == (before.st_size, before.st_mtime_ns):
        return row[2]
    digest = hash_file(resolved)
    after = resolved.stat()
    if _same_version(before, after):  # not rewritten while we read it
        with write_transaction(db):
            db.execute(
                "INSERT INTO file_hashes (path, size, mtime_ns, sha256) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (path) DO UPDATE SET size = excluded.size,"
                " mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256",
                [key, after.st_size, after.st_mtime_ns, digest],
            )
    return digest


def hash_file(path: Path) -> str:
    """Return the hex SHA-256 of a file, read in 8 MiB blocks (no caching).

    Args:
        path: The file.

    Returns:
        The lowercase hex digest.
    """
    digest = hashlib.sha256()
    buffer = bytearray(READ_BYTES)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def _same_version(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_size, a.st_mtime_ns, a.st_ino) == (b.st_size, b.st_mtime_ns, b.st_ino)
