"""Recovery fuzzed (issue 50, point 2): generated page images, cell pointer arrays, overflow chains,
header fields and ``-wal`` frames written into a real ``hearth.db``. Each case must end within
seconds, under a memory bound, without an exception, and leave a database that passes its own check
and holds only rows of Hearth's tables.

Budget: :data:`EXAMPLES` cases per test, derandomized (the same cases every run, so CI cannot turn
red by chance); each case is a full :func:`recover_database`.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model_store.db import PAGE_SIZE, database_path, open_database
from model_store.recovery import recover_database
from tests.store.hostile_db import read_page, write_chat, write_wal

EXAMPLES = 60
SECONDS = 10  # per case; bounded recovery of these files takes about one at most
PEAK_BYTES = 256 << 20  # per case, as tracemalloc counts Python's allocations
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

u16 = st.integers(0, 0xFFFF)
EDGES = [1, 2, 3, 7, 13, 0xFFFF, 0x10000, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF]  # counts and page numbers that bite
u32 = st.sampled_from([0, *EDGES]) | st.integers(0, 0xFFFFFFFF)
varint_bytes = st.lists(st.integers(0, 255), min_size=1, max_size=9).map(bytes)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """A real database: a few conversations, one message long enough for an overflow chain."""
    path = database_path(tmp_path_factory.mktemp("fuzz") / "data")
    write_chat(path, conversations=3, messages=4, long_message=True)
    return path


@st.composite
def page_images(draw) -> bytes:
    """A b-tree page: a type, a cell count, a pointer array (often aliasing), and cells made of
    payload sizes, rowids, bodies and overflow page numbers."""
    kind = draw(st.sampled_from([0x0D, 0x05, 0x02, 0x0A, 0x00, 0xFF]))
    pointers = draw(st.lists(st.sampled_from([PAGE_SIZE - 64, PAGE_SIZE - 4096, 200]) | u16, max_size=300))
    count = draw(st.just(len(pointers)) | u16)
    page = bytearray(PAGE_SIZE)
    page[0], page[3:5], page[8:12] = kind, count.to_bytes(2, "big"), draw(u32).to_bytes(4, "big")
    for i, pointer in enumerate(pointers):
        page[8 + 2 * i:10 + 2 * i] = pointer.to_bytes(2, "big")
    for pointer in set(pointers):
        cell = draw(varint_bytes) + draw(varint_bytes) + draw(st.binary(max_size=64)) + draw(u32).to_bytes(4, "big")
        page[pointer:pointer + len(cell)] = cell[:PAGE_SIZE - pointer]
    return bytes(page)


class RanTooLong(Exception):
    pass


def _too_long(*_: object) -> None:
    raise RanTooLong(f"recovery still running after {SECONDS} s")


def recover_bounded(path: Path) -> None:
    """Recover ``path`` within the case's time (an alarm stops it, so a case that would run for ever
    fails and shrinks) and memory; the result holds together."""
    tracemalloc.start()
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        recover_database(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        tracemalloc.stop()
    assert peak < PEAK_BYTES
    db = open_database(path)
    try:
        assert [row[0] for row in db.execute("PRAGMA integrity_check")] == ["ok"]
    finally:
        db.close()


def copy_of(original: Path, folder: str) -> Path:
    path = database_path(Path(folder) / "data")
    path.parent.mkdir(parents=True)
    shutil.copyfile(original, path)
    return path


@FUZZ
@given(images=st.lists(st.tuples(st.integers(1, 12), page_images()), min_size=1, max_size=4))
def test_generated_pages(original, images):
    with tempfile.TemporaryDirectory() as folder:
        path = copy_of(original, folder)
        with open(path, "r+b") as file:
            for number, image in images:
                file.seek((number - 1) * PAGE_SIZE)
                file.write(image if number > 1 else read_page(path, 1)[:100] + image[100:])
        recover_bounded(path)


@FUZZ
@given(fields=st.lists(st.tuples(st.sampled_from([16, 20, 24, 28, 32, 36, 56, 92]), u32), max_size=6),
       cut=st.none() | st.integers(0, 12 * PAGE_SIZE))
def test_generated_headers_and_truncation(original, fields, cut):
    with tempfile.TemporaryDirectory() as folder:
        path = copy_of(original, folder)
        with open(path, "r+b") as file:
            for offset, value in fields:
                file.seek(offset)
                file.write(value.to_bytes(4, "big")[-2:] if offset in (16, 20) else value.to_bytes(4, "big"))
            if cut is not None:
                file.truncate(cut)
        recover_bounded(path)


frame = st.tuples(st.integers(0, 40) | u32, st.just(0) | u32, st.integers(1, 12) | page_images())


@FUZZ
@given(frames=st.lists(frame, max_size=4), last=frame, commit=st.sampled_from(EDGES) | u32)
def test_generated_wal_frames(original, frames, last, commit):
    """Checksummed frames (so they are read), the last a commit (as a -wal ends when a transaction
    did): real pages or generated ones, under any page number and commit size."""
    frames = [*frames, (last[0], commit or 1, last[2])]
    with tempfile.TemporaryDirectory() as folder:
        path = copy_of(original, folder)
        write_wal(path, [(number, size, read_page(path, data) if isinstance(data, int) else data)
                         for number, size, data in frames])
        recover_bounded(path)
