"""Snapshots of the model's sequence state, saved at the exact end of a turn.

A snapshot lets the engine resume a conversation without prefilling it again: it is the state
after the last token of one message (``message_id``, which owns it) for one model configuration
(``fingerprint``: weights hash, quantisation, context size, backend version). It is found by the
identity of the branch it ends with (``identity``: :mod:`model_store.message_identity`), so any
branch that says the same stands on it. Its bytes come as
named *parts* -- for example ``"recurrent"`` (the fixed-size recurrent layers' state), ``"kv"``
(attention keys/values from ``kv_start`` on), ``"prefill_tokens"``, ``"decoded_tokens"``. The
store never interprets them; ``layout`` (JSON) is the engine's description of how to. The
rendered text the state holds is kept only as its length and digest (``text_chars``,
``text_digest``): enough to tell whether a new rendering starts with it, and a row stays the same
size however long the conversation grows.

Storage. The state blobs (``"kv"``, ``"recurrent"``) are files beside the database, named by
their checksum (:mod:`model_store.state_files`); the small parts (the token records) are split into
rows of at most :data:`CHUNK_BYTES` in ``snapshot_parts``. Neither writing nor reading ever needs
more than one chunk beyond the part itself in memory
(:meth:`SnapshotStore.read_part` fills a preallocated buffer chunk by chunk;
:meth:`SnapshotStore.read_part_into` hands each chunk to the caller, who puts it where it belongs).
Each part's size and checksum (:mod:`model_store.part_checksum`) are kept on the snapshot row and
checked on every read, chunk by chunk as it streams; a mismatch raises
:class:`SnapshotCorrupt` and the caller falls back to a full prefill.

Atomicity. A snapshot's files are written (then renamed) first, then its row and chunks in one
transaction, so after a crash or a ``kill -9`` a snapshot is either whole or absent; no half-written
part is ever visible (a file left without its row is swept later).

Chains and eviction. ``parent_id`` points at the snapshot of an earlier turn of the same branch,
so snapshots form trees like the messages they belong to. :meth:`SnapshotStore.evict` frees space
by dropping one part (the large ``"recurrent"`` state by default) of least-recently-used
snapshots that have a child. The newest snapshot of each branch (one with no child) is always
kept whole: it is the one that resumes the conversation.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import sqlite_utils

from model_store.db import StoreError, ancestors, from_json, read_transaction, to_json, write_transaction
from model_store.migrations import NO_PARENT_SNAPSHOT
from model_store.part_checksum import ChecksumStream, part_checksum
from model_store.state_files import FILE_PARTS, StateFiles
from model_store.storage_problems import file_problem
from model_store.text_digest import text_digest

CHUNK_BYTES = 1 << 20

PartSink = Callable[[int, bytes], None]  # (offset in the part, the chunk's bytes)


@dataclass(frozen=True)
class SnapshotRecord:
    """A snapshot's metadata; its parts' bytes are read with :meth:`SnapshotStore.read_part`."""

    id: str
    conversation_id: str
    message_id: str
    parent_id: str | None
    fingerprint: str
    format_version: int
    n_tokens: int
    kv_start: int
    text_chars: int  # the length of the rendered text the state holds (characters)
    text_digest: str  # and its digest (:func:`text_digest`): the text itself is not kept
    layout: dict[str, Any]
    checksums: dict[str, str]
    part_bytes: dict[str, int]
    created_at: float
    last_used_at: float
    identity: str = ""  # the identity of the branch the state ends with (m014_message_identity)

    def has_part(self, name: str) -> bool:
        """Whether the part ``name`` is stored (it may have been dropped by eviction)."""
        return name in self.part_bytes

    def holds(self, text: str) -> bool:
        """Whether the state holds exactly ``text`` (as rendered when it was saved)."""
        return len(text) == self.text_chars and text_digest(text) == self.text_digest

    def starts(self, text: str) -> bool:
        """Whether the text the state holds is a prefix of ``text``: a turn can stand on it."""
        return len(text) >= self.text_chars and text_digest(text[:self.text_chars]) == self.text_digest

    @property
    def nbytes(self) -> int:
        """The total size of the stored parts."""
        return sum(self.part_bytes.values())


# The record's fields are the table's columns (dict fields are JSON text).
_FIELD_NAMES = tuple(f.name for f in fields(SnapshotRecord))
_COLUMNS = ", ".join(_FIELD_NAMES)


class SnapshotCorrupt(StoreError):
    """A snapshot part cannot be read back as it was saved.

    Attributes:
        snapshot_id: The snapshot.
        part: The part being read.
        reason: Why: a missing chunk, a size or checksum mismatch, a part that is not stored
            (dropped by eviction) or a snapshot that no longer exists.
    """

    def __init__(self, snapshot_id: str, part: str, reason: str):
        self.snapshot_id = snapshot_id
        self.part = part
        self.reason = reason
        super().__init__(f"snapshot {snapshot_id}, part {part!r}: {reason}")


class SnapshotStore:
    """Saves, reads and evicts snapshots in one database."""

    def __init__(self, db: sqlite_utils.Database):
        """Wrap an open database (see :func:`model_store.db.open_database`)."""
        self.db = db
        self.files = StateFiles.beside(db)

    def save(
        self,
        *,
        conversation_id: str,
        message_id: str,
        identity: str,
        parent_id: str | None,
        fingerprint: str,
        format_version: int,
        n_tokens: int,
        kv_start: int,
        text: str,
        layout: dict[str, Any],
        parts: Mapping[str, bytes | bytearray | memoryview],
    ) -> SnapshotRecord:
        """Store a snapshot and all its parts in one transaction.

        Args:
            conversation_id: The conversation of ``message_id``.
            message_id: The message whose end the state corresponds to (deleted with it).
            identity: The identity of the branch of messages the state ends with; it is found by it.
            parent_id: The snapshot of an earlier turn this one extends, if any.
            fingerprint: Identifies the model configuration the state is valid for.
            format_version: The engine's serialisation format.
            n_tokens: Tokens in the sequence.
            kv_start: First position the ``"kv"`` part covers.
            text: The text the state corresponds to; only its length and digest are kept, to
                check a prefix match (:meth:`SnapshotRecord.starts`).
            layout: The engine's description of the parts.
            parts: Part name to bytes; each is checksummed and split into chunks.

        Returns:
            The stored record.

        Raises:
            StoreError: If the message (in that conversation) or the parent snapshot is gone.
        """
        views = {name: memoryview(data).cast("B") for name, data in parts.items()}
        now = time.time()
        record = SnapshotRecord(
            uuid.uuid4().hex, conversation_id, message_id, parent_id, fingerprint,
            format_version, n_tokens, kv_start, len(text), text_digest(text), dict(layout),
            {name: part_checksum(view) for name, view in views.items()},
            {name: view.nbytes for name, view in views.items()}, now, now, identity,
        )
        for name, view in views.items():
            if name in FILE_PARTS:
                self._write_file(record, name, view)
        with write_transaction(self.db):
            row = _row(record)
            try:  # the schema checks the references (m007_snapshot_references)
                self.db.execute(f"INSERT INTO snapshots ({_COLUMNS}) VALUES ({', '.join('?' * len(row))})", row)
            except sqlite3.IntegrityError as exc:
                raise _dangling(record, exc) from None
            for name, view in views.items():
                if name in FILE_PARTS:
                    continue
                self.db.conn.executemany(
                    "INSERT INTO snapshot_parts (snapshot_id, part, seq, data) VALUES (?, ?, ?, ?)",
                    ((record.id, name, seq, chunk) for seq, chunk in _chunks(view)),
                )
        return record

    def copy_root(self, message_id: str, conversation_id: str, new_message_id: str) -> bool:
        """Give ``new_message_id`` (in another conversation) copies of ``message_id``'s snapshots
        that stand alone (no parent: the message is the conversation's start, e.g. a document).

        Returns:
            Whether any snapshot was copied; a message whose state depends on earlier turns has
            none to copy, and is read again instead.
        """
        copied = False
        with write_transaction(self.db):
            for record in self.for_message(message_id):
                if record.parent_id is not None or record.kv_start != 0:
                    continue
                new_id = uuid.uuid4().hex
                columns = [c for c in _FIELD_NAMES if c not in ("id", "conversation_id", "message_id")]
                self.db.execute(
                    f"INSERT INTO snapshots (id, conversation_id, message_id, {', '.join(columns)})"
                    f" SELECT ?, ?, ?, {', '.join(columns)} FROM snapshots WHERE id = ?",
                    [new_id, conversation_id, new_message_id, record.id],
                )
                self.db.execute(
                    "INSERT INTO snapshot_parts (snapshot_id, part, seq, data)"
                    " SELECT ?, part, seq, data FROM snapshot_parts WHERE snapshot_id = ?",
                    [new_id, record.id],
                )
                copied = True
        return copied

    def get(self, snapshot_id: str) -> SnapshotRecord | None:
        """Return a snapshot's record, or ``None`` if there is none with that id."""
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM snapshots WHERE id = ?", [snapshot_id]
        ).fetchone()
        return _record(row) if row else None

    def find(self, identity: str, fingerprint: str) -> SnapshotRecord | None:
        """Return the newest snapshot of the branch ``identity`` names made with ``fingerprint``, if any."""
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM snapshots WHERE identity = ? AND fingerprint = ?"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1",
            [identity, fingerprint],
        ).fetchone()
        return _record(row) if row else None

    def made_for_other_models(self, identity: str, fingerprint: str) -> bool:
        """Whether the branch ``identity`` names has a snapshot made with another fingerprint than ``fingerprint``."""
        return self.db.execute("SELECT 1 FROM snapshots WHERE identity = ? AND fingerprint != ? LIMIT 1",
                               [identity, fingerprint]).fetchone() is not None

    def for_message(self, message_id: str) -> list[SnapshotRecord]:
        """Return every snapshot of ``message_id`` (any fingerprint), newest first."""
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM snapshots WHERE message_id = ?"
            " ORDER BY created_at DESC, rowid DESC",
            [message_id],
        )
        return [_record(row) for row in rows]

    def chain(self, snapshot_id: str) -> list[SnapshotRecord]:
        """Return the snapshot, its parent, grandparent, ... up to the root (``[]`` if absent)."""
        rows = ancestors(self.db, "snapshots", _COLUMNS, snapshot_id)
        return [_record(row) for row in rows]

    def read_part(self, snapshot_id: str, part: str) -> bytearray:
        """Reassemble one part, checking its chunks, size and checksum.

        Memory stays bounded: the result is preallocated at the recorded size and filled one
        chunk at a time from a cursor.

        Args:
            snapshot_id: The snapshot.
            part: The part name.

        Returns:
            The part's bytes (a ``bytearray``, so callers can hand it to C without a copy).

        Raises:
            SnapshotCorrupt: If a chunk is missing, the size or checksum differs from what was
                saved, the part is not stored or the snapshot does not exist.
        """
        buffers: list[bytearray] = []

        def make_sink(size: int) -> PartSink:
            buffers.append(bytearray(size))
            return lambda offset, data: buffers[0].__setitem__(slice(offset, offset + len(data)), data)

        self._stream_part(snapshot_id, part, make_sink)
        return buffers[0]

    def read_part_into(self, snapshot_id: str, part: str, sink: PartSink) -> None:
        """Stream one part to ``sink(offset, chunk)`` in order, then check its size and checksum.

        This lets a caller place the bytes straight where they belong (a restore writes them into
        the state blob llama.cpp reads) instead of reassembling the part first. The sink has been
        called with the bytes read so far when this raises; the caller must discard them.

        Raises:
            SnapshotCorrupt: As :meth:`read_part`.
        """
        self._stream_part(snapshot_id, part, lambda size: sink)

    def _stream_part(self, snapshot_id: str, part: str, make_sink: Callable[[int], PartSink]) -> None:
        with read_transaction(self.db):
            record = self.get(snapshot_id)
            if record is None:
                raise SnapshotCorrupt(snapshot_id, part, "the snapshot does not exist")
            if not record.has_part(part):
                raise SnapshotCorrupt(snapshot_id, part, "the part is not stored")
            if part in FILE_PARTS:
                self._stream_file(record, part, make_sink(record.part_bytes[part]))
                return
            cursor = self.db.conn.execute(
                # CAST: a damaged row holding TEXT must fail the checks, not UTF-8 decoding.
                "SELECT seq, CAST(data AS BLOB) FROM snapshot_parts"
                " WHERE snapshot_id = ? AND part = ? ORDER BY seq",
                [snapshot_id, part],
            )
            _verified_stream(record, part, cursor, make_sink(record.part_bytes[part]))

    def _write_file(self, record: SnapshotRecord, part: str, view: memoryview) -> None:
        try:
            written = self.files.write(record.checksums[part], (chunk for _, chunk in _chunks(view)))
        except OSError as exc:  # a full disk, a read-only folder
            raise file_problem(exc, self.files.path(record.checksums[part])) from None
        if not written:
            raise StoreError(f"cannot save a snapshot: its {part} part changed while it was written")

    def _stream_file(self, record: SnapshotRecord, part: str, sink: PartSink) -> None:
        try:
            _verified_stream(record, part, self.files.chunks(record.checksums[part]), sink)
        except FileNotFoundError:
            raise SnapshotCorrupt(record.id, part, "its file is missing") from None
        except OSError as exc:  # a symlink in its place (ELOOP), a read error
            raise SnapshotCorrupt(record.id, part, f"its file cannot be read ({exc.strerror or exc})") from None

    def named_files(self) -> set[str]:
        """The file names of every state part a snapshot row names."""
        rows = self.db.execute(
            "SELECT DISTINCT c.value FROM snapshots AS s, json_each(s.checksums) AS c"
            f" WHERE c.key IN ({', '.join('?' * len(FILE_PARTS))})", sorted(FILE_PARTS))
        return {self.files.path(checksum).name for (checksum,) in rows}

    def remove_unnamed_files(self, checksums: Iterable[str]) -> None:
        """Delete the files of these parts that no snapshot row names any more (after a deletion)."""
        named = self.named_files()
        self.files.remove(c for c in set(checksums) if self.files.path(c).name not in named)

    def sweep_files(self) -> int:
        """Delete old state files no row names (left by a crash between a file and its row)."""
        return self.files.sweep(self.named_files())

    def conversation_files(self, conversation_id: str) -> list[str]:
        """The checksums of a conversation's state files (read before deleting it)."""
        rows = self.db.execute(
            "SELECT c.value FROM snapshots AS s, json_each(s.checksums) AS c WHERE s.conversation_id = ?"
            f" AND c.key IN ({', '.join('?' * len(FILE_PARTS))})", [conversation_id, *sorted(FILE_PARTS)])
        return [checksum for (checksum,) in rows]

    def touch(self, snapshot_id: str) -> None:
        """Mark a snapshot as just used (eviction drops the least recently used first)."""
        with write_transaction(self.db):
            self.db.execute(
                "UPDATE snapshots SET last_used_at = ? WHERE id = ?", [time.time(), snapshot_id]
            )

    def drop_part(self, snapshot_id: str, part: str) -> int:
        """Delete one part of a snapshot, keeping the rest.

        Returns:
            The bytes freed (0 if the part was not stored).
        """
        freed, checksum = self._drop_part_row(snapshot_id, part)
        if checksum:
            self.remove_unnamed_files([checksum])
        return freed

    def _drop_part_row(self, snapshot_id: str, part: str) -> tuple[int, str]:
        """Drop the part from the database; (bytes freed, the checksum of its file, "" if none)."""
        with write_transaction(self.db):
            self.db.execute(
                "DELETE FROM snapshot_parts WHERE snapshot_id = ? AND part = ?", [snapshot_id, part]
            )
            record = self.get(snapshot_id)
            if record is None or not record.has_part(part):
                return 0, ""
            checksums = {k: v for k, v in record.checksums.items() if k != part}
            sizes = {k: v for k, v in record.part_bytes.items() if k != part}
            self.db.execute(
                "UPDATE snapshots SET checksums = ?, part_bytes = ? WHERE id = ?",
                [to_json(checksums), to_json(sizes), snapshot_id],
            )
        return record.part_bytes[part], record.checksums[part] if part in FILE_PARTS else ""

    def total_bytes(self) -> int:
        """Return the size of every stored part of every snapshot."""
        (total,) = self.db.execute(
            "SELECT coalesce(sum(p.value), 0) FROM snapshots AS s, json_each(s.part_bytes) AS p"
        ).fetchone()
        return int(total)

    def conversation_bytes(self, conversation_id: str) -> dict[str, int]:
        """Return one conversation's snapshot sizes, per part name."""
        rows = self.db.execute(
            "SELECT p.key, sum(p.value) FROM snapshots AS s, json_each(s.part_bytes) AS p"
            " WHERE s.conversation_id = ? GROUP BY p.key ORDER BY p.key",
            [conversation_id],
        )
        return {key: int(size) for key, size in rows}

    def evict(self, budget_bytes: int, part: str = "recurrent") -> list[str]:
        """Drop ``part`` of least-recently-used inner snapshots until the total fits the budget.

        Only snapshots with at least one child snapshot are candidates, so the newest snapshot
        of every branch stays whole. Each drop is its own short transaction, so the other
        process is never locked out for long. Stops early when no candidate is left.

        Args:
            budget_bytes: The total (:meth:`total_bytes`) to get down to.
            part: The part to drop.

        Returns:
            The ids of the snapshots whose part was dropped, in eviction order.
        """
        total = self.total_bytes()
        if total <= budget_bytes:
            return []
        candidates = self.db.execute(
            "SELECT s.id, s.part_bytes FROM snapshots AS s"
            " WHERE EXISTS (SELECT 1 FROM snapshots AS c WHERE c.parent_id = s.id)"
            " ORDER BY s.last_used_at, s.created_at, s.rowid"
        ).fetchall()
        evicted, dropped_files = [], []
        for snapshot_id, part_bytes in candidates:
            if total <= budget_bytes:
                break
            if part in from_json(part_bytes):
                freed, checksum = self._drop_part_row(snapshot_id, part)
                total -= freed
                dropped_files += [checksum] if checksum else []
                if freed:
                    evicted.append(snapshot_id)
        self.remove_unnamed_files(dropped_files)  # once, after every drop: not a scan of the rows per drop
        return evicted


def _verified_stream(record: SnapshotRecord, part: str, rows: Iterator[tuple[int, bytes]], sink: PartSink) -> None:
    size = record.part_bytes[part]
    checksum = ChecksumStream(record.checksums.get(part, ""))
    offset = next_seq = 0
    for seq, data in rows:
        if seq != next_seq:
            raise SnapshotCorrupt(record.id, part, f"chunk {next_seq} is missing")
        end = offset + len(data)
        if end > size:
            raise SnapshotCorrupt(record.id, part, f"size mismatch: more than {size} bytes")
        sink(offset, data)
        checksum.update(data)
        offset, next_seq = end, next_seq + 1
    if offset < size:
        if next_seq < -(-size // CHUNK_BYTES):
            raise SnapshotCorrupt(record.id, part, f"chunk {next_seq} is missing")
        raise SnapshotCorrupt(record.id, part, f"size mismatch: {offset} of {size} bytes")
    if not checksum.matches():
        raise SnapshotCorrupt(record.id, part, "checksum mismatch")


def _chunks(view: memoryview) -> Iterator[tuple[int, memoryview]]:
    for seq, start in enumerate(range(0, view.nbytes, CHUNK_BYTES)):
        yield seq, view[start : start + CHUNK_BYTES]


def _row(record: SnapshotRecord) -> list[Any]:
    values = (getattr(record, name) for name in _FIELD_NAMES)
    return [to_json(v) if isinstance(v, dict) else v for v in values]


def _record(row: tuple) -> SnapshotRecord:
    values = dict(zip(_FIELD_NAMES, row))
    for name in ("layout", "checksums", "part_bytes"):
        values[name] = from_json(values[name])
    return SnapshotRecord(**values)


def _dangling(record: SnapshotRecord, refused: sqlite3.IntegrityError) -> StoreError:
    """The reference the database refused, in words."""
    if NO_PARENT_SNAPSHOT in str(refused):
        return StoreError(f"cannot save a snapshot: no parent snapshot {record.parent_id}")
    return StoreError(f"cannot save a snapshot: no message {record.message_id} in conversation {record.conversation_id}")
