"""Length-prefixed frames on a byte stream: ``b"HF"`` + little-endian u32 length + payload.

The magic lets a reader find its way back after garbage; the length cap means a corrupt header
cannot make it allocate or wait for gigabytes. Bad frames are reported (as :class:`FrameError`
items) and reading goes on, so one bad write never ends the conversation between the processes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

MAGIC = b"HF"
HEADER = struct.Struct("<2sI")
MAX_FRAME_BYTES = 16 * 1024 * 1024


class FrameError(Exception):
    """A frame that could not be read; reading continues with the next one."""


def frame(payload: bytes) -> bytes:
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame holds at most {MAX_FRAME_BYTES} bytes, got {len(payload)}")
    return HEADER.pack(MAGIC, len(payload)) + payload


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks, remaining = [], n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _resync(stream: BinaryIO, bad_header: bytes) -> bytes | None:
    """Skip bytes until the magic; returns the header that starts there (None at EOF)."""
    window = bad_header[1:]
    while True:
        at = window.find(MAGIC)
        if at >= 0:
            start = window[at:]
            rest = _read_exactly(stream, HEADER.size - len(start))
            return None if rest is None else start + rest
        window = window[-1:]  # it may be the first byte of the magic
        byte = stream.read(1)
        if not byte:
            return None
        window += byte


def read_frames(stream: BinaryIO) -> Iterator[bytes | FrameError]:
    """Payloads until EOF, with a :class:`FrameError` in place of each unreadable frame."""
    header = _read_exactly(stream, HEADER.size)
    while header is not None:
        magic, length = HEADER.unpack(header)
        if magic != MAGIC:
            yield FrameError("a frame did not start with the protocol's magic bytes; skipped to the next frame")
            header = _resync(stream, header)
            continue
        if length > MAX_FRAME_BYTES:
            yield FrameError(f"a frame claimed {length} bytes (the limit is {MAX_FRAME_BYTES}); ignored")
            header = _read_exactly(stream, HEADER.size)
            continue
        payload = _read_exactly(stream, length)
        if payload is None:
            return
        yield payload
        header = _read_exactly(stream, HEADER.size)
