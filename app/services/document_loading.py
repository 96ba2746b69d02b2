"""Loading a document into a conversation, the same for the CLI and the GUI.

1. :func:`store_document` stores the text as a message of the conversation (a new one unless
   given) and records the document, as the conversation's one writer until the read ends;
2. :func:`read_command` asks the engine to read it: one worker task that measures the rendered
   conversation against the context, reads, and snapshots the state under that message. A document
   that does not fit is not read: the engine ends ``too_long`` with the numbers, which
   :func:`too_long` turns into an error that says by how much and what to do (nothing is cut
   silently);
3. :func:`keep_if_read` keeps the document only if it was read to the end: after a cancelled,
   failed or too long read it takes the message and its record back out, so the conversation is as
   it was before (a conversation made for the document is deleted) and no later question reads a
   document the user stopped.

The first or last part of a document too long is cut first: :func:`fit_command` asks the engine for
the part that fits a budget (:func:`part_budget`: what the ``too_long`` report left for it), and
:func:`check_fit` takes it; then it is stored and read as above. A text too big to send at all
(more than :data:`MAX_MEASURE_CHARS`) is measured that way too, and refused whole. Questions are
then ordinary turns after the document message.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.services.turn import (CLOCK_SETTING, Writer, conversation_turns, hold_conversation, template_clock,
                               template_spec)
from engine import protocol as p
from app.engine_clients.client import new_request_id
from model_store.conversations import Conversation, ConversationStore, Message
from model_store.db import StoreError
from model_store.documents import Document, DocumentStore
from app.services.extract import ExtractedDocument
from model_store.snapshots import SnapshotStore
from model_store.writer_lock import WriterLock

MAX_MEASURE_CHARS = 3_000_000  # more text than any context holds; even at 4 bytes a character it fits a frame
# The one number a too-long message gives is the room; what it is, and the parts, are said in words:
ROOM_WORDS = "(the rest of the context is kept free for questions and answers)"
PARTS_WORDS = "read only as much of its beginning or its end as fits (--part first / --part last)"
CUT_MARGIN_TOKENS = 8  # a part cut to a budget may read as a few more tokens where it meets the heading


class DocumentTooLong(ValueError):
    """The document does not fit the model's context; the message says by how much and what to do.

    ``summary`` is the first half (the numbers), for a caller that offers the choices its own way;
    ``budget_tokens`` is what a first or last part may have (:func:`part_budget`);
    ``tokens`` and ``held_tokens`` (the document's, the conversation's before it) say what a context
    must hold (app.services.model_suggestion).
    """

    def __init__(self, summary: str, budget_tokens: int, *, remote: bool = False, tokens: int = 0,
                 held_tokens: int = 0) -> None:
        self.summary = summary
        self.budget_tokens = budget_tokens
        self.tokens, self.held_tokens, self.remote = tokens, held_tokens, remote
        bigger = ("use a model with a longer context on the engine" if remote else
                  "free some memory or use a model with a longer context")
        super().__init__(f"{summary}; {bigger}, or {PARTS_WORDS}")


def document_message(title: str, text: str) -> str:
    return f"Document: {title}\n\n{text}"


def fit_command(text: str, part: str, budget_tokens: int = 0) -> p.MeasureText:
    """Ask the engine to count (and for first/last, cut to ``budget_tokens``; 0: its default) the text."""
    if len(text) > MAX_MEASURE_CHARS:
        text = text[:MAX_MEASURE_CHARS] if part != "last" else text[-MAX_MEASURE_CHARS:]
    return p.MeasureText(request_id=new_request_id("measure"), text=text, keep=part, budget_tokens=budget_tokens)


def sendable(text: str) -> bool:
    """Whether all of ``text`` can go to the engine to be read (else only a part can)."""
    return len(text) <= MAX_MEASURE_CHARS


def check_fit(document: ExtractedDocument, measured: p.TextMeasured, part: str, engine: str = "") -> str:
    """The first or last part of ``document`` that ``measured`` cut; :class:`DocumentTooLong` when
    there is none, or when all of a text too big to send was asked for (``engine``: the remote engine
    that measured it)."""
    if part != "all" and measured.kept_text:
        return measured.kept_text
    room = p.DocumentRoom(tokens=measured.tokens, held_tokens=0, budget_tokens=measured.budget_tokens,
                          grown_budget_tokens=measured.grown_budget_tokens)
    raise too_long(document.title, room, engine=engine, more_than=not sendable(document.text))


def too_long(title: str, room: p.DocumentRoom, *, engine: str = "", in_conversation: bool = False,
             more_than: bool = False) -> DocumentTooLong:
    """The error for a document that ``room`` cannot hold (``engine``: the remote engine that measured
    it, whose context cannot grow; ``more_than``: only the part that could be sent was counted)."""
    counted = f"more than {room.tokens:,}" if more_than else f"{room.tokens:,}"
    after = f" after the {room.held_tokens:,} tokens already in this conversation" if in_conversation else ""
    room_tokens = max(room.budget_tokens, room.grown_budget_tokens)
    over = room.tokens - room_tokens
    where = (f"the context of {engine} leaves room for {room_tokens:,}{after} ({over:,} too many)" if engine else
             f"this model's context leaves room for {room_tokens:,}{after} ({over:,} too many), even in the longest "
             "context it can have now")
    where += f" {ROOM_WORDS}"
    return DocumentTooLong(f"{title} has {counted} tokens but {where}", part_budget(title, room),
                           remote=bool(engine), tokens=room.tokens, held_tokens=room.held_tokens)


def fits_once_grown(room: p.DocumentRoom) -> bool:
    """All of the document fits a context the engine can grow to now, not the one it has."""
    return room.budget_tokens < room.tokens <= room.grown_budget_tokens


def part_budget(title: str, room: p.DocumentRoom) -> int:
    """The tokens a first or last part of the document may have, so that it, under its heading
    (at most a token a byte), fits where ``room`` says all of it did not."""
    heading = len(document_message(title, "").encode("utf-8"))
    return max(1, room.budget_tokens - heading - CUT_MARGIN_TOKENS)


@dataclass
class StoredDocument:
    conversation: Conversation
    message: Message
    document: Document
    before: Conversation | None  # the conversation before the document was added; None: made for it
    writer: WriterLock | None = None  # held while the document is read (see keep_if_read)


def store_document(store: ConversationStore, documents: DocumentStore, extracted: ExtractedDocument, text: str,
                   tokens: int, part: str, *, model: str, source_path: str | None, writer: Writer | None = None,
                   conversation_id: str | None = None, after: str | None = None,
                   system_prompt: str = "") -> StoredDocument:
    """Add the document as a message (after ``after``, else after the newest message; in a new
    conversation named after it, with ``system_prompt``, when ``conversation_id`` is None), as the
    conversation's one writer until :func:`keep_if_read`; a new conversation is created in the same
    transaction."""

    def fill(held_id: str) -> tuple[Conversation | None, Message, Document]:
        before = store.get(held_id) if conversation_id else None
        parent = after
        if parent is None:
            branch = store.current_branch(held_id)
            parent = branch[-1].id if branch else None
        message = store.add_message(held_id, "user", document_message(extracted.title, text), parent_id=parent)
        document = documents.add(conversation_id=held_id, message_id=message.id, title=extracted.title,
                                 kind=extracted.kind, text=text, source_path=source_path,
                                 source_bytes=extracted.source_bytes, pages=extracted.pages, tokens=tokens, part=part)
        return before, message, document

    title = extracted.title if conversation_id else store.free_title(extracted.title)
    conversation, (before, message, document), lock = hold_conversation(
        store, conversation_id, writer, fill, title=title, model=model, system_prompt=system_prompt)
    return StoredDocument(conversation, message, document, before, lock)


@dataclass(frozen=True)
class LoadedBefore:
    """A document already read into a conversation with the same text: offered instead of a copy."""

    document: Document
    conversation: Conversation


def loaded_before(store: ConversationStore, documents: DocumentStore, text: str, part: str,
                  model: str) -> LoadedBefore | None:
    """The newest conversation with ``model`` holding a document of exactly ``text`` (read as
    ``part``), if any. (With another model it is read again: its snapshots are that model's.)"""
    for document in documents.with_text(text, part):
        try:
            conversation = store.get(document.conversation_id)
        except StoreError:  # deleted meanwhile
            continue
        if conversation.model == model:
            return LoadedBefore(document, conversation)
    return None


def keep_if_read(store: ConversationStore, documents: DocumentStore, stored: StoredDocument,
                 finish_reason: str | None) -> bool:
    """Whether the document was read to the end; if not (cancelled, failed, never answered), take
    it back out so the conversation is as it was before :func:`store_document`. Either way the
    conversation is let go (:func:`release_document`)."""
    try:
        if finish_reason == "stop":
            return True
        if stored.before is None:
            store.delete(stored.conversation.id)
        else:
            documents.remove(stored.document, leaf_id=stored.before.leaf_id, updated_at=stored.before.updated_at)
        return False
    finally:
        release_document(store, stored)


def release_document(store: ConversationStore, stored: StoredDocument) -> None:
    """Let the next writer into the document's conversation (once; never raises)."""
    if stored.writer is not None:
        stored.writer.release(store.db)
        stored.writer = None


def reading_speed(event: p.PromptProgress) -> tuple[float, float]:
    """(tokens per second so far, seconds left) of a document being read."""
    rate = event.processed / (event.elapsed_ms / 1000) if event.elapsed_ms else 0.0
    return rate, (event.total - event.processed) / rate if rate else 0.0


def read_command(store: ConversationStore, conversation_id: str, message_id: str, *,
                 grow: bool = True) -> p.ReadDocument:
    """The engine's one task for a stored document: measure, read, report (``grow``: False ends a
    document that fits only once the context grows ``too_long``, for the user to choose)."""
    history, conversation = store.branch(message_id), store.get(conversation_id)
    return p.ReadDocument(request_id=new_request_id("read"), conversation_id=conversation_id,
                          messages=conversation_turns(history, conversation), template=template_spec(conversation),
                          grow=grow)


def copy_document(store: ConversationStore, message_id: str) -> tuple[StoredDocument, p.ReadDocument | None]:
    """A new conversation holding the document of ``message_id``: its message, its record and
    (when the document stands alone) its snapshot. Returns it with the command that reads it, or
    None when the snapshot was copied and nothing needs reading."""
    documents = DocumentStore(store.db)
    source = documents.for_message(message_id)
    message = store.message(message_id)
    original = store.get(message.conversation_id)
    # the copy keeps the original's template clock and system prompt: what its template wrote stays the same,
    # so its snapshot fits
    conversation = store.create(store.free_title(source.title if source else "Document"), model=original.model,
                                settings={CLOCK_SETTING: template_clock(original)},
                                system_prompt=original.system_prompt)
    copy = store.add_message(conversation.id, "user", message.content, parent_id=None)
    record = documents.copy_to(source, conversation.id, copy.id) if source is not None else None
    copied = SnapshotStore(store.db).copy_root(message_id, conversation.id, copy.id)
    stored = StoredDocument(conversation, copy, record, before=None)
    return stored, (None if copied else read_command(store, conversation.id, copy.id))
