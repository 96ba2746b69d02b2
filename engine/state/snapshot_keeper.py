"""Saving the live sequence state at a turn end, and bringing it back, exactly.

A snapshot stores, as separate parts in SQLite (:mod:`model_store.snapshots`):

* ``recurrent``: the fixed-size recurrent state (hybrid and recurrent models), opaque bytes;
* ``kv``: only the attention-KV *cells* this snapshot added since its parent snapshot on the same
  branch, so a long conversation holds each token's KV once, not once per turn;
* ``prefill_tokens`` / ``decoded_tokens``: how the tokens since the parent entered the state (read
  in chunks, then written one at a time).

Restoring snapshot *k* takes the nearest snapshot *j* on its chain (k itself if it can) whose
recurrent part and all KV cells below it are present and pass their checksums, loads that blob, and
then *replays* the recorded segments from j to k with the same batch shapes, which rebuilds k's
state bit for bit. A refused part (checksum, missing chunk, evicted) therefore costs time, never
correctness; when even the token records are unusable the caller re-reads the conversation.
Every snapshot carries a fingerprint of the model file and of the settings that shape the state
bytes; one with another fingerprint is never loaded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from engine.backends.base import ContextSettings
from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.backends.llama_cpp import BACKEND_VERSION
from engine.models.session import ModelSession
from engine.state.seq_state import (KvCells, KvLayout, Scatter, StateFormatError, parse_kv, plan_blob, split_header,
                                    with_header)
from model_store.snapshots import SnapshotCorrupt, SnapshotRecord, SnapshotStore

FORMAT_VERSION = 1


class SnapshotUnusable(Exception):
    """This snapshot cannot give the state; the message says why (shown to the user as a note)."""


@dataclass(frozen=True)
class Segment:
    """Tokens that entered the state since the parent snapshot: prefilled in chunks, then one by one."""

    prefill: list[int]
    decoded: list[int]
    chunks: tuple[int, ...] = ()  # lengths of the prefill's chunks; () means batch-sized chunks

    @property
    def tokens(self) -> list[int]:
        return self.prefill + self.decoded


@dataclass(frozen=True)
class Captured:
    """The live state taken apart: KV layout and cells (None without attention), recurrent bytes."""

    layout: KvLayout | None
    cells: KvCells | None
    recurrent: bytes
    n_tokens: int


@dataclass(frozen=True)
class Checkpoint:
    """The state at an earlier point of the live sequence: where, and its recurrent part then."""

    n_tokens: int
    recurrent: bytes


@dataclass(frozen=True)
class HeldState:
    """A saved snapshot whose state the live sequence still holds but for its recurrent part: its KV
    cells are the live sequence's first tokens (later tokens left them as they were), and its
    recurrent part is kept in memory. Moving back to it is a copy, as llama-server restores its
    context checkpoints, instead of reading the snapshot's files (tens of MB of KV by turn 10)."""

    snapshot_id: str
    resets: int  # the session's reset count when it was taken: any reset since loses the KV
    tokens: tuple[int, ...]
    recurrent_blob: bytes | None  # the recurrent part as llama.cpp reads it back (None: the model has none)


def model_fingerprint(file_sha256: str, settings: ContextSettings) -> str:
    """Identifies what the state bytes depend on: the exact model file, llama.cpp, KV layout."""
    identity = {"file": file_sha256, "backend": BACKEND_VERSION, "flash_attn": settings.flash_attn,
                "kv_type": settings.kv_type, "format": FORMAT_VERSION}
    return hashlib.blake2b(json.dumps(identity, sort_keys=True).encode(), digest_size=16).hexdigest()


def _tokens_bytes(tokens: list[int]) -> bytes:
    return np.asarray(tokens, dtype="<i4").tobytes()


def _tokens_from(data: bytes) -> list[int]:
    return np.frombuffer(data, dtype="<i4").tolist()


class SnapshotKeeper:
    """The engine's side of snapshots for one loaded model."""

    def __init__(self, store: SnapshotStore, session: ModelSession, fingerprint: str) -> None:
        self.store = store
        self.session = session
        self.fingerprint = fingerprint
        facts = session.facts
        self.has_recurrent = facts.has_recurrent_state
        self.has_kv = facts.has_attention_kv

    # -- saving ----------------------------------------------------------------------------------

    def capture(self) -> Captured:
        """The live state, taken apart into its KV cells and recurrent bytes (one copy, for any saves)."""
        context = self.session.context
        _, body = split_header(context.state_get(0))
        recurrent = self.capture_recurrent()
        if not self.has_kv:
            return Captured(None, None, recurrent, self.session.n_past)
        layout, cells = parse_kv(body, len(body) - len(recurrent))
        return Captured(layout, cells, recurrent, self.session.n_past)

    def capture_recurrent(self) -> bytes:
        """The fixed-size recurrent part of the live state (b"" for a model without one)."""
        if not self.has_recurrent:
            return b""
        return bytes(split_header(self.session.context.state_get(0, STATE_PARTIAL_ONLY))[1])

    def save(self, *, conversation_id: str, message_id: str, identity: str, parent: SnapshotRecord | None,
             segment: Segment, text: str, captured: Captured | None = None,
             point: Checkpoint | None = None) -> SnapshotRecord:
        """Store a state that is exactly ``parent``'s state plus ``segment``: the live one (or
        ``captured``), or with ``point`` the state at an earlier point of it (its recurrent part as
        taken then; the KV cells up to it, which later tokens do not change, from ``captured``)."""
        captured = captured or self.capture()
        layout, cells = captured.layout, captured.cells
        n_tokens = point.n_tokens if point is not None else captured.n_tokens
        recurrent = point.recurrent if point is not None else captured.recurrent
        kv_start = parent.n_tokens if parent is not None else 0
        parts = {"prefill_tokens": _tokens_bytes(segment.prefill), "decoded_tokens": _tokens_bytes(segment.decoded)}
        if cells is not None:
            expected = np.arange(captured.n_tokens, dtype=np.int32)
            if not np.array_equal(cells.positions, expected):
                raise StateFormatError("the KV cells do not cover positions 0..n-1 in order")
            parts["kv"] = cells.since(kv_start, n_tokens).to_bytes()
        if self.has_recurrent:
            parts["recurrent"] = recurrent
        layout_json = {"kv": layout.to_json() if layout else None, "prefill_chunk": self.session.n_batch,
                       "prefill_chunks": list(segment.chunks) or None}
        return self.store.save(
            conversation_id=conversation_id, message_id=message_id, identity=identity,
            parent_id=parent.id if parent is not None else None, fingerprint=self.fingerprint,
            format_version=FORMAT_VERSION, n_tokens=n_tokens, kv_start=kv_start, text=text,
            layout=layout_json, parts=parts,
        )

    def hold(self, record: SnapshotRecord, point: Checkpoint) -> HeldState:
        """Keep ``record`` (saved from ``point``, an earlier point of the live sequence) to rewind to."""
        tokens = tuple(self.session.tokens[:point.n_tokens])
        blob = with_header(0, point.recurrent) if self.has_recurrent else None  # made now, not when it is used
        return HeldState(record.id, self.session.resets, tokens, blob)

    # -- restoring -------------------------------------------------------------------------------

    def rewind(self, held: HeldState, snapshot: SnapshotRecord) -> bool:
        """Put ``snapshot``'s state into the session from ``held`` when the live sequence still
        holds it (see :class:`HeldState`); False when it does not, and the snapshot must be restored."""
        session, n_tokens = self.session, snapshot.n_tokens
        if held.snapshot_id != snapshot.id or held.resets != session.resets or len(held.tokens) != n_tokens \
                or session.n_past < n_tokens or tuple(session.tokens[:n_tokens]) != held.tokens:
            return False
        if not session.rewind(n_tokens, held.recurrent_blob):
            session.reset()
            return False
        self.store.touch(snapshot.id)
        return True

    def restore(self, snapshot: SnapshotRecord, notes: list[str]) -> int:
        """Put ``snapshot``'s state into the session; returns how many tokens were replayed.

        Why a stored state had to be skipped is appended to ``notes``; :class:`SnapshotUnusable`
        means no exact restore is possible (the token record itself is damaged, or foreign).
        """
        chain = self._checked_chain(snapshot)
        segments = [self._segment(record) for record in reversed(chain)]  # root first
        history = [token for segment in segments for token in segment.tokens]
        start = self._load_nearest_state(chain, history, notes)
        session = self.session
        if start == len(chain):
            session.reset()
        replayed = 0
        for segment in segments[len(chain) - start:]:
            self._replay(segment)
            replayed += len(segment.tokens)
        if session.n_past != snapshot.n_tokens:
            raise SnapshotUnusable(f"replay ended at {session.n_past} tokens, expected {snapshot.n_tokens}")
        self.store.touch(snapshot.id)
        return replayed

    def _checked_chain(self, snapshot: SnapshotRecord) -> list[SnapshotRecord]:
        chain = self.store.chain(snapshot.id)
        for record in chain:
            if record.fingerprint != self.fingerprint:
                raise SnapshotUnusable("the snapshot was made by another model file or other settings")
            if record.format_version != FORMAT_VERSION:
                raise SnapshotUnusable(f"the snapshot has format {record.format_version}, this version reads "
                                       f"{FORMAT_VERSION}")
        if chain[-1].kv_start != 0:
            raise SnapshotUnusable("the snapshot's chain is incomplete (an earlier snapshot is gone)")
        return chain

    def _segment(self, record: SnapshotRecord) -> Segment:
        try:
            prefill = _tokens_from(self.store.read_part(record.id, "prefill_tokens"))
            decoded = _tokens_from(self.store.read_part(record.id, "decoded_tokens"))
        except SnapshotCorrupt as exc:
            raise SnapshotUnusable(f"the conversation's token record is damaged ({exc})") from exc
        if record.n_tokens - (len(prefill) + len(decoded)) != record.kv_start:
            raise SnapshotUnusable("the token record does not add up to the snapshot's length")
        chunks = tuple(record.layout.get("prefill_chunks") or ())
        if chunks and sum(chunks) != len(prefill):
            raise SnapshotUnusable("the recorded prefill chunks do not add up to the prefill")
        return Segment(prefill, decoded, chunks)

    def _load_nearest_state(self, chain: list[SnapshotRecord], history: list[int], notes: list[str]) -> int:
        """Load the deepest usable state blob on the chain; returns its index (len(chain): none)."""
        for index, record in enumerate(chain):
            try:
                blob = self._assemble(chain[index:])
            except (SnapshotCorrupt, SnapshotUnusable, StateFormatError) as exc:
                if index == 0:
                    notes.append(f"the saved state was refused ({exc}); it was rebuilt from the token record")
                continue
            self.session.reset()
            if not self.session.context.state_set(blob):
                if index == 0:
                    notes.append("llama.cpp refused the saved state; it was rebuilt from the token record")
                continue
            self.session.tokens = history[: record.n_tokens]
            return index
        return len(chain)

    def _assemble(self, chain: list[SnapshotRecord]) -> np.ndarray:
        """The blob of ``chain[0]``: each stored part is streamed straight into its place."""
        head = chain[0]
        if self.has_recurrent and not head.has_part("recurrent"):
            raise SnapshotUnusable("its recurrent part was evicted to stay within the disk budget")
        recurrent_bytes = head.part_bytes["recurrent"] if self.has_recurrent else 0
        layout_json = head.layout.get("kv")
        layout = KvLayout.from_json(layout_json) if self.has_kv and layout_json is not None else None
        pieces = list(reversed(chain)) if layout is not None else []  # root first: position order
        plan = plan_blob(0, layout, [self._cell_count(r, layout) for r in pieces], recurrent_bytes)
        blob = plan.allocate()
        for record, sections in zip(pieces, plan.pieces):
            self.store.read_part_into(record.id, "kv", Scatter(blob, sections))
        if self.has_recurrent:
            self.store.read_part_into(head.id, "recurrent", Scatter(blob, ((0, recurrent_bytes, plan.recurrent_offset),)))
        if layout is not None and not np.array_equal(plan.positions(blob), np.arange(head.n_tokens, dtype=np.int32)):
            raise SnapshotUnusable("the stored KV cells do not line up")
        return blob

    @staticmethod
    def _cell_count(record: SnapshotRecord, layout: KvLayout) -> int:
        if not record.has_part("kv"):
            raise SnapshotUnusable(f"the KV part of snapshot {record.id} is missing")
        count, rest = divmod(record.part_bytes["kv"], layout.cell_bytes)
        if rest:
            raise StateFormatError(f"its KV part is not a whole number of {layout.cell_bytes}-byte cells")
        return count

    def _replay(self, segment: Segment) -> None:
        if segment.chunks:
            done = 0
            for length in segment.chunks:
                self.session.feed(segment.prefill[done:done + length])
                done += length
        else:
            self.session.feed(segment.prefill)
        for token in segment.decoded:
            self.session.feed([token])
