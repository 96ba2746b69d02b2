"""file_sha256: correct, computed once per file version, recomputed when the file changes."""

from __future__ import annotations

import hashlib
import os

import pytest

from model_store import file_hashes
from model_store.db import open_database
from model_store.file_hashes import file_sha256, hash_file


@pytest.fixture
def reads(monkeypatch):
    """Count the files actually read (hashed) instead of served from the cache."""
    seen = []
    real = file_hashes.hash_file

    def counting(path):
        seen.append(path)
        return real(path)

    monkeypatch.setattr(file_hashes, "hash_file", counting)
    return seen


def test_value_is_the_sha256_across_several_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(file_hashes, "READ_BYTES", 7)  # force many partial blocks
    path = tmp_path / "model.gguf"
    data = os.urandom(1000)
    path.write_bytes(data)
    assert hash_file(path) == hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert hash_file(empty) == hashlib.sha256(b"").hexdigest()


def test_cached_by_resolved_path(db, tmp_path, reads):
    path = tmp_path / "model.gguf"
    data = os.urandom(100_000)
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()

    assert file_sha256(db, path) == expected
    assert file_sha256(db, path) == expected
    assert file_sha256(db, tmp_path / "sub" / ".." / "model.gguf") == expected
    assert len(reads) == 1
    row = db.execute("SELECT path, size, mtime_ns, sha256 FROM file_hashes").fetchall()
    assert row == [(str(path.resolve()), 100_000, path.stat().st_mtime_ns, expected)]


def test_cache_survives_reopening(db_path, tmp_path, reads):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"weights")
    first = open_database(db_path)
    file_sha256(first, path)
    first.close()
    second = open_database(db_path)
    try:
        assert file_sha256(second, path) == hashlib.sha256(b"weights").hexdigest()
    finally:
        second.close()
    assert len(reads) == 1


def test_recomputed_when_size_changes(db, tmp_path, reads):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"version one")
    file_sha256(db, path)
    path.write_bytes(b"version two, longer")
    assert file_sha256(db, path) == hashlib.sha256(b"version two, longer").hexdigest()
    assert len(reads) == 2
    assert db.execute("SELECT count(*) FROM file_hashes").fetchone()[0] == 1


def test_recomputed_when_only_mtime_changes(db, tmp_path, reads):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"AAAA")
    stat = path.stat()
    file_sha256(db, path)
    path.write_bytes(b"BBBB")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert file_sha256(db, path) == hashlib.sha256(b"BBBB").hexdigest()
    assert len(reads) == 2
    assert file_sha256(db, path) == hashlib.sha256(b"BBBB").hexdigest()
    assert len(reads) == 2


def test_missing_file_raises(db, tmp_path):
    with pytest.raises(FileNotFoundError):
        file_sha256(db, tmp_path / "absent.gguf")
