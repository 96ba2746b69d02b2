"""The database schema, built by named migrations applied in order.

This module is the only place the schema changes. Each migration is a function decorated with
:func:`migration`; its name (``m001_conversations``, ...) is recorded in the ``_migrations``
table once applied, so :func:`migrate` runs only the ones a database has not seen yet. Never edit
or rename a migration that has shipped: add a new one.

Each migration runs in its own ``BEGIN IMMEDIATE`` transaction together with its record, and
re-checks the record inside that transaction, so two processes opening a new file at the same
time apply every migration exactly once. A migration that must rebuild a table (SQLite cannot
alter constraints) has to run with foreign keys off, which cannot be switched inside a
transaction; add support for that when the first such migration is needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import sqlite_utils

from model_store.message_identity import ROOT, row_identity
from model_store.state_files import FILE_PARTS, StateFiles
from model_store.text_digest import text_digest


Transaction = Callable[[sqlite_utils.Database], AbstractContextManager]
MIGRATIONS_TABLE = "_migrations"

MigrationFn = Callable[[sqlite_utils.Database], None]


@dataclass(frozen=True)
class Migration:
    """One registered schema change."""

    name: str
    fn: MigrationFn


MIGRATIONS: list[Migration] = []


def migration(fn: MigrationFn) -> MigrationFn:
    """Register ``fn`` as the next migration, named after the function.

    Args:
        fn: Takes the database and changes the schema with plain SQL.

    Returns:
        ``fn`` unchanged.
    """
    if any(m.name == fn.__name__ for m in MIGRATIONS):
        raise ValueError(f"migration {fn.__name__} is registered twice")
    MIGRATIONS.append(Migration(fn.__name__, fn))
    return fn


def applied_migrations(db: sqlite_utils.Database) -> list[str]:
    """Return the names of the migrations already applied to ``db``, in the order applied."""
    if not db[MIGRATIONS_TABLE].exists():
        return []
    rows = db.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY applied_at, rowid")
    return [name for (name,) in rows]


def pending_migrations(db: sqlite_utils.Database) -> list[str]:
    """The names of the migrations ``db`` still lacks (empty when its schema is current)."""
    done = set(applied_migrations(db))
    return [m.name for m in MIGRATIONS if m.name not in done]


def migrate(db: sqlite_utils.Database, transaction: Transaction, *, upto: str | None = None) -> list[str]:
    """Apply the migrations ``db`` is missing, in registration order.

    Args:
        db: The database.
        transaction: How to run one write transaction on it (:func:`model_store.db.write_transaction`;
            passed in, so the schema's history does not depend on the connection code that opens it).
        upto: Stop after the migration with this name (tests use it to build old schemas).

    Returns:
        The names applied by this call (empty when the schema was already current).
    """
    wanted = _registered_upto(upto)
    done = set(applied_migrations(db))
    applied = []
    for m in wanted:
        if m.name in done:
            continue
        with transaction(db):
            # Another process may have applied it since we looked; we now hold the write lock.
            if m.name in _names_locked(db):
                continue
            m.fn(db)
            db.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                [m.name, time.time()],
            )
        applied.append(m.name)
    return applied


def _registered_upto(upto: str | None) -> list[Migration]:
    if upto is None:
        return list(MIGRATIONS)
    names = [m.name for m in MIGRATIONS]
    if upto not in names:
        raise ValueError(f"no migration named {upto!r}; known: {', '.join(names)}")
    return MIGRATIONS[: names.index(upto) + 1]


def _names_locked(db: sqlite_utils.Database) -> set[str]:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at REAL)"
    )
    return {name for (name,) in db.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")}


@migration
def m001_conversations(db: sqlite_utils.Database) -> None:
    """Conversations and their tree of messages."""
    db.execute(
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            model TEXT NOT NULL,
            settings TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            leaf_id TEXT
        )"""
    )
    db.execute(
        """CREATE TABLE messages (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            parent_id TEXT REFERENCES messages(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            stats TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    db.execute("CREATE INDEX messages_conversation_id ON messages(conversation_id)")
    db.execute("CREATE INDEX messages_parent_id ON messages(parent_id)")


@migration
def m002_snapshots(db: sqlite_utils.Database) -> None:
    """Model-state snapshots at turn ends, their parts stored as chunks."""
    db.execute(
        """CREATE TABLE snapshots (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            parent_id TEXT REFERENCES snapshots(id) ON DELETE CASCADE,
            fingerprint TEXT NOT NULL,
            format_version INTEGER NOT NULL,
            n_tokens INTEGER NOT NULL,
            kv_start INTEGER NOT NULL,
            text TEXT NOT NULL,
            layout TEXT NOT NULL DEFAULT '{}',
            checksums TEXT NOT NULL DEFAULT '{}',
            part_bytes TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            last_used_at REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX snapshots_message_fingerprint ON snapshots(message_id, fingerprint)")
    # Foreign-key columns: cascading deletes and the "has a child" test of eviction use these.
    db.execute("CREATE INDEX snapshots_conversation_id ON snapshots(conversation_id)")
    db.execute("CREATE INDEX snapshots_parent_id ON snapshots(parent_id)")
    db.execute(
        """CREATE TABLE snapshot_parts (
            snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
            part TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (snapshot_id, part, seq)
        )"""
    )


@migration
def m003_file_hashes(db: sqlite_utils.Database) -> None:
    """Cached sha256 of files (model weights), keyed by resolved path."""
    db.execute(
        """CREATE TABLE file_hashes (
            path TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            sha256 TEXT NOT NULL
        )"""
    )


@migration
def m004_documents(db: sqlite_utils.Database) -> None:
    """Documents read into a conversation: which message holds each, its hash, size and tokens."""
    db.execute(
        """CREATE TABLE documents (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            title TEXT NOT NULL,
            kind TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            source_path TEXT,
            source_bytes INTEGER NOT NULL,
            pages INTEGER,
            tokens INTEGER NOT NULL,
            part TEXT NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX documents_conversation_id ON documents(conversation_id)")
    db.execute("CREATE INDEX documents_message_id ON documents(message_id)")


@migration
def m005_models(db: sqlite_utils.Database) -> None:
    """Installed models: downloads from the catalogue and validated imports (model_store.installed)."""
    db.execute(
        """CREATE TABLE models (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            path TEXT NOT NULL UNIQUE,
            size_bytes INTEGER NOT NULL,
            sha256 TEXT,
            source TEXT NOT NULL CHECK (source IN ('download', 'import')),
            catalogue_id TEXT,
            quant TEXT,
            architecture TEXT,
            added_at REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX models_catalogue_id ON models(catalogue_id, quant)")


@migration
def m006_writer_locks(db: sqlite_utils.Database) -> None:
    """Who is writing in a conversation (model_store.writer_lock): one writer at a time, across processes."""
    db.execute(
        """CREATE TABLE writer_locks (
            conversation_id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            who TEXT NOT NULL,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            process_started REAL NOT NULL,
            taken_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL
        )"""
    )


NO_TURN_MESSAGE = "no such message in that conversation"
NO_PARENT_SNAPSHOT = "no such parent snapshot"


@migration
def m007_snapshot_references(db: sqlite_utils.Database) -> None:
    """A snapshot refers to a message of its own conversation and to a parent snapshot that exists,
    checked by the database itself: whoever saves one (the worker) never reads the messages table."""
    db.execute(
        f"""CREATE TRIGGER snapshots_refer_to_their_turn BEFORE INSERT ON snapshots
        BEGIN
            SELECT RAISE(ABORT, '{NO_TURN_MESSAGE}') WHERE NOT EXISTS (
                SELECT 1 FROM messages WHERE id = NEW.message_id AND conversation_id = NEW.conversation_id);
            SELECT RAISE(ABORT, '{NO_PARENT_SNAPSHOT}') WHERE NEW.parent_id IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM snapshots WHERE id = NEW.parent_id);
        END"""
    )


@migration
def m008_message_reasoning(db: sqlite_utils.Database) -> None:
    """An answer's reasoning (a model's <think> block), kept apart from the answer itself."""
    db.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''")


@migration
def m009_message_outcome(db: sqlite_utils.Database) -> None:
    """How an answer ended (``finish``: stop, max_tokens, context, cancelled, error; "" before this was
    kept) and why one failed (``error``, shown with it after a restart). A failed answer stored before
    keeps the reason its stats recorded."""
    db.execute("ALTER TABLE messages ADD COLUMN finish TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE messages ADD COLUMN error TEXT NOT NULL DEFAULT ''")
    db.execute("UPDATE messages SET finish = 'error' WHERE status = 'error'")
    db.execute(
        """UPDATE messages SET error = COALESCE(
               (SELECT group_concat(value, '; ') FROM json_each(messages.stats, '$.errors')), '')
           WHERE status = 'error' AND json_valid(stats)"""
    )


@migration
def m010_conversation_system_prompt(db: sqlite_utils.Database) -> None:
    """A conversation's own system prompt, sent before its messages ("": none, the model's default).
    A new conversation starts with the user's default (Settings); earlier ones have none, as before."""
    db.execute("ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT ''")


@migration
def m011_eagle3_heads(db: sqlite_utils.Database) -> None:
    """An imported EAGLE-3 head (architecture ``eagle3``) keeps the model it was made for, so the models it
    fits are found without opening it: the target's hidden size and the three layer ids it reads (a
    JSON list). NULL for every model."""
    db.execute("ALTER TABLE models ADD COLUMN target_hidden_size INTEGER")
    db.execute("ALTER TABLE models ADD COLUMN target_layers TEXT")


@migration
def m012_snapshot_text_digest(db: sqlite_utils.Database) -> None:
    """A snapshot keeps the length and digest of the text its state holds, not the text: every row
    repeated the whole conversation so far, so that text grew with the square of its length."""
    db.execute("ALTER TABLE snapshots ADD COLUMN text_chars INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE snapshots ADD COLUMN text_digest TEXT NOT NULL DEFAULT ''")
    last = -1
    while rows := db.execute("SELECT rowid, text FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT 200",
                             [last]).fetchall():  # a few rows at a time: each holds a whole conversation
        db.conn.executemany("UPDATE snapshots SET text_chars = ?, text_digest = ? WHERE rowid = ?",
                            ((len(text), text_digest(text), rowid) for rowid, text in rows))
        last = rows[-1][0]
    db.execute("ALTER TABLE snapshots DROP COLUMN text")


@migration
def m013_snapshot_state_files(db: sqlite_utils.Database) -> None:
    """The state blobs of snapshots (``kv``, ``recurrent``) move out of the database into files beside
    it, named by checksum (:mod:`model_store.state_files`). A part whose chunks no longer add up to
    its checksum is dropped, as eviction drops one: the engine replays or re-reads instead."""
    files = StateFiles.beside(db)
    parts = db.execute(
        "SELECT s.id, c.key, c.value FROM snapshots AS s, json_each(s.checksums) AS c"
        f" WHERE c.key IN ({', '.join('?' * len(FILE_PARTS))})", sorted(FILE_PARTS)).fetchall()
    for snapshot_id, part, checksum in parts:
        chunks = (data for (data,) in db.execute(
            "SELECT CAST(data AS BLOB) FROM snapshot_parts WHERE snapshot_id = ? AND part = ? ORDER BY seq",
            [snapshot_id, part]))
        if not files.write(checksum, chunks):
            db.execute("UPDATE snapshots SET checksums = json_remove(checksums, '$.' || ?),"
                       " part_bytes = json_remove(part_bytes, '$.' || ?) WHERE id = ?", [part, part, snapshot_id])
    db.execute(f"DELETE FROM snapshot_parts WHERE part IN ({', '.join('?' * len(FILE_PARTS))})", sorted(FILE_PARTS))


@migration
def m014_message_identity(db: sqlite_utils.Database) -> None:
    """Each message keeps its identity (:mod:`model_store.message_identity`), and each snapshot the
    identity of the branch its state ends with, so a request is matched to what is stored by what
    its messages say, after a restart too. Existing snapshots take their message's identity."""
    db.execute("ALTER TABLE messages ADD COLUMN identity TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE snapshots ADD COLUMN identity TEXT NOT NULL DEFAULT ''")
    known: dict[str, str] = {}
    while _identify_messages(db, known):  # a message stored before its parent waits for the next pass
        pass
    db.execute("UPDATE snapshots SET identity = COALESCE("
               "(SELECT m.identity FROM messages AS m WHERE m.id = snapshots.message_id), '')")
    db.execute("CREATE INDEX messages_identity ON messages(identity)")
    db.execute("CREATE INDEX snapshots_identity_fingerprint ON snapshots(identity, fingerprint)")


def _identify_messages(db: sqlite_utils.Database, known: dict[str, str]) -> bool:
    """One pass over the messages without an identity, in the order stored, giving one to each whose
    parent has one; True if some were given one and some still wait."""
    last, given, waiting = -1, 0, 0
    while rows := db.execute("SELECT rowid, id, parent_id, role, content, reasoning FROM messages"
                             " WHERE rowid > ? AND identity = '' ORDER BY rowid LIMIT 500", [last]).fetchall():
        updates = []
        for _, message_id, parent_id, role, content, reasoning in rows:
            if parent_id is not None and parent_id not in known:
                waiting += 1
                continue
            known[message_id] = row_identity(known.get(parent_id, ROOT), role, content, reasoning)
            updates.append((known[message_id], message_id))
        db.conn.executemany("UPDATE messages SET identity = ? WHERE id = ?", updates)
        given += len(updates)
        last = rows[-1][0]
    return given > 0 and waiting > 0


@migration
def m015_message_tool_part(db: sqlite_utils.Database) -> None:
    """Each message keeps its tool part (:mod:`engine.protocol.tools.tool_part`): the calls an answer made, or the
    call a tool's result answers. "" for every earlier message, whose identity stays as it was."""
    db.execute("ALTER TABLE messages ADD COLUMN tool_part TEXT NOT NULL DEFAULT ''")
