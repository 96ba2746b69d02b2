"""Documents read into conversations.

The document's text is the content of one message of the conversation (so the transcript, the
snapshots and a re-read after a refused snapshot all see the same text); this table records what
that message is: title, kind, a hash of the text, where it came from, its pages and tokens, and
whether all of it or only its first or last part was kept to fit the model's context. The tokens
are first the text's own count (to see whether it fits), then, once it is read, the count the engine
read (:meth:`DocumentStore.set_tokens`: the text with its title and the chat template's markers),
which is the number ``hearth doc load`` and the window report.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, fields, replace

import sqlite_utils

from model_store.db import StoreError, write_transaction

PARTS = ("all", "first", "last")


@dataclass(frozen=True)
class Document:
    id: str
    conversation_id: str
    message_id: str
    title: str
    kind: str
    content_sha256: str
    source_path: str | None
    source_bytes: int
    pages: int | None
    tokens: int
    part: str
    created_at: float


_COLUMNS = ", ".join(f.name for f in fields(Document))


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DocumentStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def add(self, *, conversation_id: str, message_id: str, title: str, kind: str, text: str,
            source_path: str | None, source_bytes: int, pages: int | None, tokens: int, part: str) -> Document:
        """Record that ``message_id`` holds a document whose text is ``text``."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
        document = Document(uuid.uuid4().hex, conversation_id, message_id, title, kind, text_sha256(text),
                            source_path, source_bytes, pages, tokens, part, time.time())
        with write_transaction(self.db):
            self._insert(document)
        return document

    def _insert(self, document: Document) -> None:
        self.db.execute(f"INSERT INTO documents ({_COLUMNS}) VALUES ({', '.join('?' * len(fields(Document)))})",
                        [getattr(document, f.name) for f in fields(Document)])

    def copy_to(self, document: Document, conversation_id: str, message_id: str) -> Document:
        """Record the same document for a copy of its message in another conversation."""
        copy = Document(uuid.uuid4().hex, conversation_id, message_id, document.title, document.kind,
                        document.content_sha256, document.source_path, document.source_bytes, document.pages,
                        document.tokens, document.part, time.time())
        with write_transaction(self.db):
            self._insert(copy)
        return copy

    def set_tokens(self, document: Document, tokens: int) -> Document:
        """Record the tokens the engine read for the document (the count a read reports), in place
        of the count measured before it was read."""
        with write_transaction(self.db):
            self.db.execute("UPDATE documents SET tokens = ? WHERE id = ?", [tokens, document.id])
        return replace(document, tokens=tokens)

    def remove(self, document: Document, *, leaf_id: str | None, updated_at: float) -> None:
        """Take back a document that was never read: delete its message (its record, and anything
        under the message, go with it by ``ON DELETE CASCADE``) and give its conversation back the
        leaf and the time it had before the document was added."""
        with write_transaction(self.db):
            self.db.execute("DELETE FROM messages WHERE id = ?", [document.message_id])
            self.db.execute("UPDATE conversations SET leaf_id = ?, updated_at = ? WHERE id = ?",
                            [leaf_id, updated_at, document.conversation_id])

    def get(self, document_id: str) -> Document:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM documents WHERE id = ?", [document_id]).fetchone()
        if row is None:
            raise StoreError(f"no document {document_id}")
        return Document(*row)

    def for_conversation(self, conversation_id: str) -> list[Document]:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM documents WHERE conversation_id = ? ORDER BY created_at, rowid",
                               [conversation_id])
        return [Document(*row) for row in rows]

    def with_text(self, text: str, part: str) -> list[Document]:
        """Documents already loaded with exactly this text (same hash) and part, newest first."""
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM documents WHERE content_sha256 = ? AND part = ? "
                               "ORDER BY created_at DESC, rowid DESC", [text_sha256(text), part])
        return [Document(*row) for row in rows]

    def for_message(self, message_id: str) -> Document | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM documents WHERE message_id = ?", [message_id]).fetchone()
        return None if row is None else Document(*row)
