"""The pages of a SQLite file, read without SQLite, for ``hearth db recover``.

SQLite refuses a whole table (often the whole file) once one page on the way is bad, and a
truncated file fails even its first query. SQLite's own answer is the shell's ``.recover``, built
on the ``sqlite_dbpage`` table; neither is available everywhere (the Python build used here has no
``sqlite_dbpage``), so this module reads the file the way ``.recover`` does, from the documented
format (https://www.sqlite.org/fileformat2.html):

- The file is a sequence of pages of one size. Page 1 starts with the 100-byte header (page size,
  reserved bytes per page, text encoding, page count, first freelist page).
- A table is a b-tree of pages. An interior page (type 0x05) holds the child page numbers; a leaf
  (type 0x0D) holds the rows, one cell each: payload size and rowid (varints), then the payload.
  A payload too long for its page continues on a chain of overflow pages (4 bytes: next page).
- A payload is a record: a header of serial types (varints), then the values.
- Committed pages not yet copied back from the ``-wal`` file are read from it (checksummed frames
  up to the last commit), as SQLite itself would.

A page past the end of the file is missing; a page cut short by truncation keeps what is left, and
every read is bounds-checked against it, so a cell is read only when all of its bytes are there.
Nothing here writes; every problem with one page or one cell is an :class:`Unreadable`, which the
caller counts and goes past.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from model_store.db import PAGE_SIZE

TABLE_LEAF, TABLE_INTERIOR = 0x0D, 0x05
BTREE_TYPE_BYTES = (b"\x02", b"\x05", b"\x0a", b"\x0d")  # index interior, table interior, index leaf, table leaf
HEADER_MAGIC = b"SQLite format 3\x00"
FILE_HEADER_BYTES = 100
PAGE_SIZES = (PAGE_SIZE, *(1 << n for n in range(9, 17) if 1 << n != PAGE_SIZE))  # Hearth's own first
WAL_MAGIC = 0x377F0682  # the low bit says the checksums' word order: 0 little-endian, 1 big-endian
ENCODINGS = {1: "utf-8", 2: "utf-16-le", 3: "utf-16-be"}
MAX_PAGE_NUMBER = 0xFFFFFFFE  # SQLite's largest page count
WAL_HEADER_BYTES, WAL_FRAME_HEADER_BYTES = 32, 24


class Unreadable(Exception):
    """A page or cell that cannot be read (missing, cut short, or not what it should be)."""


class PageFile:
    """One SQLite file's pages, with the committed pages of its ``-wal`` over them."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.size = Path(path).stat().st_size
        header = self._raw(0, FILE_HEADER_BYTES)
        self.header_ok = len(header) == FILE_HEADER_BYTES and header.startswith(HEADER_MAGIC)
        self.page_size = _header_page_size(header) if self.header_ok else self._guess_page_size()
        self.usable = self.page_size - (header[20] if self.header_ok else 0)
        self.encoding = ENCODINGS.get(int.from_bytes(header[56:60], "big"), "utf-8") if self.header_ok else "utf-8"
        self.wal_frames, wal_claim = _committed_wal_frames(Path(f"{path}-wal"), self.page_size)
        self.file_pages = -(-self.size // self.page_size)
        past_file = [number for number in self.wal_frames if number > self.file_pages]
        self.page_count = self.file_pages + len(past_file)  # the pages held, in the file or its -wal
        self.last_page = max(past_file, default=self.file_pages)  # a page past this one cannot be read
        counted_ok = self.header_ok and header[92:96] == header[24:28]  # the count is valid for this version
        # what the header (or the -wal's last commit) says the database held: a claim, not a fact
        self.pages_claimed = max(int.from_bytes(header[28:32], "big") if counted_ok else 0, wal_claim)
        self.freelist_head = int.from_bytes(header[32:36], "big") if self.header_ok else 0
        self.asked_past_end: set[int] = set()  # pages the file's own pointers lead to, past what it holds
        self.overflow_owner: dict[int, tuple[int, int]] = {}  # overflow page -> (leaf, cell) whose chain has it
        self.claimed_leaves: set[int] = set()  # leaves whose cells' overflow chains were claimed

    @property
    def pages_missing(self) -> int:
        """Pages the database held that the file has lost: only when its pointers lead past its end,
        and then up to the furthest page both they and the header (or the -wal) say it had; the
        pages of an SQLite file leave no gaps, so every page up to that one existed."""
        if not self.asked_past_end:
            return 0
        if self.pages_claimed > self.last_page:
            return min(max(self.asked_past_end), self.pages_claimed) - self.last_page
        if self.pages_claimed:  # the header says nothing was cut: a pointer past the end is damage
            return 0
        return len(self.asked_past_end)  # no count to weigh them with: only the pages pointed to

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> PageFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def page(self, number: int) -> bytes:
        """Page ``number`` (1-based), shorter than a page where the file was cut inside it."""
        if number in self.wal_frames:
            wal, offset = self.wal_frames[number]
            with open(wal, "rb") as file:
                file.seek(offset)
                return file.read(self.page_size)
        if not 1 <= number <= self.file_pages:
            if self.last_page < number <= MAX_PAGE_NUMBER:
                self.asked_past_end.add(number)
            raise Unreadable(f"page {number} is outside the file")
        data = self._raw((number - 1) * self.page_size, self.page_size)
        if not data:
            raise Unreadable(f"page {number} is past the end of the file")
        return data

    def numbers(self) -> Iterator[int]:
        """The number of every page held, in the file's order, then the -wal's."""
        yield from range(1, self.file_pages + 1)
        yield from sorted(number for number in self.wal_frames if number > self.file_pages)

    def page_type(self, number: int) -> int | None:
        """The b-tree type byte of page ``number`` (None when missing)."""
        try:
            data = self.page(number)
        except Unreadable:
            return None
        start = FILE_HEADER_BYTES if number == 1 else 0
        return data[start] if len(data) > start else None

    def freelist(self) -> set[int]:
        """The pages on the freelist (free pages may hold stale rows): trunk pages list leaf pages."""
        free: set[int] = set()
        trunk = self.freelist_head
        while trunk and trunk not in free:
            free.add(trunk)
            try:
                data = self.page(trunk)
                count = int.from_bytes(take(data, 4, 4), "big")
                leaves = take(data, 8, 4 * min(count, self.usable // 4 - 2))
            except Unreadable:
                break
            free.update(int.from_bytes(leaves[i:i + 4], "big") for i in range(0, len(leaves), 4))
            trunk = int.from_bytes(data[:4], "big")
        return free

    def _raw(self, offset: int, size: int) -> bytes:
        self.file.seek(offset)
        return self.file.read(size)

    def _guess_page_size(self) -> int:
        """Page 1 is gone: the smallest size at which (nearly) as many page starts look like b-tree
        pages as at the best one. A multiple of the true size samples page starts too, a smaller
        size mostly the middle of pages."""
        def share(size: int) -> float:
            starts = range(size, min(self.size, size * 257), size)
            return sum(self._raw(start, 1) in BTREE_TYPE_BYTES for start in starts) / max(1, len(starts))
        shares = {size: share(size) for size in sorted(PAGE_SIZES)}
        best = max(shares.values())
        return PAGE_SIZE if best == 0 else min(size for size, found in shares.items() if found >= 0.8 * best)


def _header_page_size(header: bytes) -> int:
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size if size in PAGE_SIZES else PAGE_SIZES[0]


def _committed_wal_frames(wal: Path, page_size: int) -> tuple[dict[int, tuple[Path, int]], int]:
    """Where the newest committed copy of each page lies in ``wal``, and the page count its last
    commit claims (a claim: the frames show which pages it really holds).

    A frame counts when its salts match the WAL header's and its running checksum is right; frames
    after the last commit frame belong to a transaction that never finished and are left out. The
    file is read a frame at a time, so a huge or sparse ``-wal`` costs no more memory than a frame.
    """
    frames: dict[int, tuple[Path, int]] = {}
    try:
        file = open(wal, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return frames, 0
    with file:
        header = file.read(WAL_HEADER_BYTES)
        if len(header) < WAL_HEADER_BYTES or int.from_bytes(header[:4], "big") & ~1 != WAL_MAGIC \
                or int.from_bytes(header[8:12], "big") != page_size:
            return frames, 0
        order = ">" if header[3] & 1 else "<"
        sums = _wal_checksum(header[:24], (0, 0), order)
        if sums != struct.unpack(">II", header[24:32]):
            return frames, 0
        pending: dict[int, tuple[Path, int]] = {}
        claimed, offset = 0, WAL_HEADER_BYTES
        while len(frame := file.read(WAL_FRAME_HEADER_BYTES + page_size)) == WAL_FRAME_HEADER_BYTES + page_size:
            head = frame[:WAL_FRAME_HEADER_BYTES]
            if head[8:16] != header[16:24]:
                break
            sums = _wal_checksum(frame[WAL_FRAME_HEADER_BYTES:], _wal_checksum(head[:8], sums, order), order)
            if sums != struct.unpack(">II", head[16:24]):
                break
            page, commit_size = struct.unpack(">II", head[:8])
            if 1 <= page <= MAX_PAGE_NUMBER:
                pending[page] = (wal, offset + WAL_FRAME_HEADER_BYTES)
            if commit_size:
                frames.update(pending)
                pending, claimed = {}, commit_size
            offset += len(frame)
    return frames, claimed


def _wal_checksum(data: bytes, sums: tuple[int, int], order: str) -> tuple[int, int]:
    s0, s1 = sums
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def take(data: bytes, offset: int, size: int) -> bytes:
    """``size`` bytes of ``data`` from ``offset``; Unreadable when they are not all there."""
    if offset < 0 or size < 0 or offset + size > len(data):
        raise Unreadable("a read past the end of the page")
    return data[offset:offset + size]


def varint(data: bytes, offset: int) -> tuple[int, int]:
    """The varint at ``offset`` (1 to 9 bytes, big-endian, 7 bits a byte, all 8 in the ninth) and
    the offset after it."""
    value = 0
    for i in range(9):
        byte = take(data, offset + i, 1)[0]
        if i == 8:
            return (value << 8) | byte, offset + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, offset + i + 1
    raise AssertionError("unreachable")
