"""Reading and writing llama.cpp's per-sequence state blobs (``llama_state_seq_get_data``).

A blob is ``u32 magic, i32 seq_id`` followed by the attention-KV part (absent for purely recurrent
models) and the recurrent part (absent for transformers). The recurrent part is fixed-size and kept
opaque. The KV part holds one row per cached token and layer, so it is split here into *cells*:
per-token metadata plus K and V rows, which lets a snapshot store only the cells its parent did not
have and lets a restore reassemble the exact blob llama.cpp expects: :func:`plan_blob` says where
each stored piece's sections go, and :class:`Scatter` streams a piece from the database straight
into place, so a restore copies each byte once on its way to llama.cpp. See the reference notes
(``llama-cpp-hybrid.md`` §B2) for the layout; a layout this parser does not understand (V stored
transposed, several sequences in one blob) raises :class:`StateFormatError` so the caller falls
back to re-reading the conversation instead of storing something it cannot restore.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = 0xAF143CD8
_U32, _I32, _U64 = struct.Struct("<I"), struct.Struct("<i"), struct.Struct("<Q")


class StateFormatError(ValueError):
    """The blob does not have the layout this code can split and reassemble."""


@dataclass(frozen=True)
class KvLayout:
    """Everything about the KV part except the cells themselves; JSON-friendly."""

    n_stream: int
    stream: int  # the stream that holds this sequence's cells
    meta_bytes: int  # per cell: pos, n_seq_id, [x, y, tok], seq_id
    v_trans: int
    k: tuple[tuple[int, int], ...]  # per layer: (ggml type, row bytes)
    v: tuple[tuple[int, int], ...]

    def to_json(self) -> dict:
        return {"n_stream": self.n_stream, "stream": self.stream, "meta_bytes": self.meta_bytes,
                "v_trans": self.v_trans, "k": [list(x) for x in self.k], "v": [list(x) for x in self.v]}

    @classmethod
    def from_json(cls, data: dict) -> "KvLayout":
        return cls(data["n_stream"], data["stream"], data["meta_bytes"], data["v_trans"],
                   tuple(tuple(x) for x in data["k"]), tuple(tuple(x) for x in data["v"]))

    @property
    def cell_bytes(self) -> int:
        return self.meta_bytes + sum(r for _, r in self.k) + sum(r for _, r in self.v)


@dataclass(frozen=True)
class KvCells:
    """Cells sorted by position: metadata rows and per-layer K/V rows (numpy uint8 views)."""

    positions: np.ndarray  # int32
    meta: np.ndarray  # [n, meta_bytes]
    k: list[np.ndarray]  # per layer [n, row bytes]
    v: list[np.ndarray]

    def since(self, start: int, end: int | None = None) -> "KvCells":
        """The cells at positions ``start`` up to ``end`` (excluded; None: to the last)."""
        n = len(self.positions)
        if n and self.positions[0] == 0 and self.positions[-1] == n - 1:  # 0..n-1 in order: views, no copy
            begin, stop = min(max(start, 0), n), n if end is None else min(max(end, 0), n)
            return KvCells(self.positions[begin:stop], self.meta[begin:stop], [a[begin:stop] for a in self.k],
                           [a[begin:stop] for a in self.v])
        keep = (self.positions >= start) & (self.positions < (np.iinfo(np.int32).max if end is None else end))
        return KvCells(self.positions[keep], self.meta[keep], [a[keep] for a in self.k], [a[keep] for a in self.v])

    def to_bytes(self) -> bytes:
        """One copy of the cells' bytes (a long context's KV is hundreds of MB: no copy per layer first)."""
        return b"".join(memoryview(np.ascontiguousarray(a)).cast("B") for a in (self.meta, *self.k, *self.v))


class _Reader:
    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data, self.offset = memoryview(data), offset

    def take(self, fmt: struct.Struct) -> int:
        value = fmt.unpack_from(self.data, self.offset)[0]
        self.offset += fmt.size
        return value

    def skip(self, n: int) -> memoryview:
        if self.offset + n > len(self.data):
            raise StateFormatError("the state blob ends early")
        view = self.data[self.offset : self.offset + n]
        self.offset += n
        return view


def split_header(blob: bytes) -> tuple[int, memoryview]:
    """(seq_id, body) of a blob, the body a view into it (no copy); checks the magic."""
    if len(blob) < 8 or _U32.unpack_from(blob, 0)[0] != MAGIC:
        raise StateFormatError("not a llama.cpp sequence state (bad magic)")
    return _I32.unpack_from(blob, 4)[0], memoryview(blob)[8:]


def with_header(seq_id: int, body: bytes) -> bytes:
    """A blob of ``body`` for sequence ``seq_id`` (the inverse of :func:`split_header`)."""
    return _U32.pack(MAGIC) + _I32.pack(seq_id) + body


def _parse_kv(body: bytes, meta_bytes: int) -> tuple[KvLayout, KvCells, int]:
    r = _Reader(body)
    n_stream = r.take(_U32)
    found: tuple[int, int, bytes] | None = None
    for stream in range(n_stream):
        count = r.take(_U32)
        if count == 0:
            continue
        if found is not None:
            raise StateFormatError("the sequence spans several KV streams")
        meta = bytes(r.skip(count * meta_bytes))
        found = (stream, count, meta)
        v_trans, n_layer = r.take(_U32), r.take(_U32)
        if v_trans not in (0, 1) or n_layer > 4096:
            raise StateFormatError("implausible KV header")
        if v_trans:
            raise StateFormatError("V is stored transposed (flash attention off); cannot split by cell")
        k, v = [], []
        for rows in (k, v):
            for _ in range(n_layer):
                kind, row_bytes = r.take(_I32), r.take(_U64)
                rows.append(((kind, row_bytes), np.frombuffer(r.skip(count * row_bytes), np.uint8).reshape(count, row_bytes)))
    if found is None:
        layout = KvLayout(n_stream, 0, meta_bytes, 0, (), ())
        empty = KvCells(np.zeros(0, np.int32), np.zeros((0, meta_bytes), np.uint8), [], [])
        return layout, empty, r.offset
    stream, count, meta = found
    layout = KvLayout(n_stream, stream, meta_bytes, 0, tuple(x for x, _ in k), tuple(x for x, _ in v))
    meta_rows = np.frombuffer(meta, np.uint8).reshape(count, meta_bytes)
    positions = meta_rows[:, :4].copy().view("<i4").reshape(count)
    order = np.argsort(positions, kind="stable")
    if np.array_equal(order, np.arange(count)):  # already in order (the usual case): views into the blob
        return layout, KvCells(positions, meta_rows, [a for _, a in k], [a for _, a in v]), r.offset
    cells = KvCells(positions[order], meta_rows[order], [a[order] for _, a in k], [a[order] for _, a in v])
    return layout, cells, r.offset


def parse_kv(body: bytes, kv_length: int) -> tuple[KvLayout, KvCells]:
    """Split the first ``kv_length`` bytes of a blob body (after the header) into layout and cells.

    Whether cells carry the extra (x, y, tok) fields depends on the model's rope type; both are
    tried and the one that consumes the KV part exactly is taken.
    """
    for meta_bytes in (12, 24):  # pos, n_seq_id, seq_id  |  pos, n_seq_id, x, y, tok, seq_id
        try:
            layout, cells, used = _parse_kv(body[:kv_length], meta_bytes)
        except (StateFormatError, struct.error, ValueError):
            continue
        if used == kv_length and _single_sequence(cells, meta_bytes):
            return layout, cells
    raise StateFormatError("the KV part has a layout this version cannot split")


def _single_sequence(cells: KvCells, meta_bytes: int) -> bool:
    n_seq_id = cells.meta[:, 4:8].copy().view("<u4").reshape(-1) if len(cells.positions) else np.ones(0)
    return bool(np.all(n_seq_id == 1)) and bool(np.all(cells.positions >= 0))


@dataclass(frozen=True)
class BlobPlan:
    """Where every byte of a reassembled blob comes from.

    The blob is fixed bytes (header, stream counts, per-layer row descriptions), then the stored
    KV *pieces* (each in its stored form ``meta | K rows per layer | V rows per layer``, see
    :meth:`KvCells.to_bytes`), whose sections are interleaved across the blob, then the recurrent
    part. ``pieces[i]`` lists piece *i*'s sections as ``(offset in the piece, length, offset in the
    blob)`` in piece order, so a piece can be streamed straight into place (:class:`Scatter`).
    """

    size: int
    fixed: tuple[tuple[int, bytes], ...]
    pieces: tuple[tuple[tuple[int, int, int], ...], ...]
    meta_offset: int
    n_cells: int
    meta_bytes: int
    recurrent_offset: int

    def allocate(self) -> np.ndarray:
        """An uninitialised blob with its fixed bytes written; the pieces fill the rest."""
        out = np.empty(self.size, dtype=np.uint8)
        for offset, data in self.fixed:
            out[offset : offset + len(data)] = np.frombuffer(data, np.uint8)
        return out

    def positions(self, blob: np.ndarray) -> np.ndarray:
        """The positions of the cells as written into ``blob``, in blob order."""
        meta = blob[self.meta_offset : self.meta_offset + self.n_cells * self.meta_bytes]
        return meta.reshape(self.n_cells, self.meta_bytes)[:, :4].copy().view("<i4").reshape(self.n_cells)


def plan_blob(seq_id: int, layout: KvLayout | None, counts: list[int], recurrent_bytes: int) -> BlobPlan:
    """The plan for a blob of ``counts[i]`` cells from piece *i* (pieces in position order) and a
    recurrent part of ``recurrent_bytes``; ``layout=None`` means no KV part."""
    fixed: list[tuple[int, bytes]] = []
    sections: list[list[tuple[int, int, int]]] = [[] for _ in counts]
    offset = 0

    def put(data: bytes) -> None:
        nonlocal offset
        fixed.append((offset, data))
        offset += len(data)

    def place(width: int) -> None:  # one section of every piece: `width` bytes per cell
        nonlocal offset
        for piece, count in enumerate(counts):
            done = sum(length for _, length, _ in sections[piece])
            sections[piece].append((done, count * width, offset))
            offset += count * width

    put(_U32.pack(MAGIC) + _I32.pack(seq_id))
    meta_offset, total = 0, sum(counts)
    if layout is not None:
        put(_U32.pack(layout.n_stream))
        for stream in range(layout.n_stream):
            n = total if stream == layout.stream else 0
            put(_U32.pack(n))
            if n == 0:
                continue
            meta_offset = offset
            place(layout.meta_bytes)
            put(_U32.pack(layout.v_trans) + _U32.pack(len(layout.k)))
            for kind, row_bytes in (*layout.k, *layout.v):
                put(_I32.pack(kind) + _U64.pack(row_bytes))
                place(row_bytes)
    recurrent_offset = offset
    return BlobPlan(offset + recurrent_bytes, tuple(fixed), tuple(tuple(s) for s in sections), meta_offset,
                    total, layout.meta_bytes if layout else 0, recurrent_offset)


class Scatter:
    """Writes a piece streamed in order (``scatter(offset, chunk)``) to its sections of a blob."""

    def __init__(self, blob: np.ndarray, sections: tuple[tuple[int, int, int], ...]) -> None:
        self.blob = blob
        self.sections = sections
        self._next = 0  # the first section not yet completely written

    def __call__(self, offset: int, chunk: bytes) -> None:
        data = np.frombuffer(chunk, np.uint8)
        end = offset + len(data)
        while self._next < len(self.sections):
            source, length, target = self.sections[self._next]
            low, high = max(source, offset), min(source + length, end)
            if low < high:
                self.blob[target + low - source : target + high - source] = data[low - offset : high - offset]
            if source + length > end:
                return  # the section goes on in the next chunk
            self._next += 1


def build_blob(seq_id: int, layout: KvLayout | None, pieces: list[bytes], recurrent: bytes) -> np.ndarray:
    """The whole blob from KV pieces in their stored form (position order) and the recurrent part."""
    counts = [len(piece) // layout.cell_bytes for piece in pieces] if layout is not None else []
    plan = plan_blob(seq_id, layout, counts, len(recurrent))
    blob = plan.allocate()
    for piece, sections in zip(pieces, plan.pieces):
        Scatter(blob, sections)(0, piece)
    Scatter(blob, ((0, len(recurrent), plan.recurrent_offset),))(0, recurrent)
    return blob
