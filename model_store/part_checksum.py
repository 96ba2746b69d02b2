"""Checksums of snapshot parts: written as XXH3-128, checked chunk by chunk as the part streams in.

A restore reads every byte of a snapshot (about a hundred megabytes for a long conversation) and
must check them all before llama.cpp sees them. SHA-256 hashes slower than a disk reads, so hashing cost
more than reading; XXH3-128 hashes several times faster (docs/performance.md, "Measurements behind the design"). The checksum guards against damaged or truncated
bytes, not against a deliberate forger (the database is the user's own file), so a fast
non-cryptographic hash is the right tool.

A checksum is stored as ``"xxh3-128:<hex>"``. Snapshots written before that carry a bare SHA-256
hex digest; they are still checked, with SHA-256, so an upgrade never refuses a good snapshot.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Protocol

import xxhash

_PREFIX = "xxh3-128:"


class _Hasher(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


def part_checksum(data: bytes | bytearray | memoryview) -> str:
    """The checksum stored for a part's bytes."""
    return _PREFIX + xxhash.xxh3_128_hexdigest(data)


class ChecksumStream:
    """``update`` with each chunk in order, then ``matches`` tells whether they add up to ``expected``."""

    def __init__(self, expected: str) -> None:
        self._expected = expected
        self._legacy = not expected.startswith(_PREFIX)
        make: Callable[[], _Hasher] = hashlib.sha256 if self._legacy else xxhash.xxh3_128
        self._hash = make()

    def update(self, data: bytes | memoryview) -> None:
        self._hash.update(data)

    def matches(self) -> bool:
        digest = self._hash.hexdigest()
        return self._expected == (digest if self._legacy else _PREFIX + digest)
