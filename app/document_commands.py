"""``hearth doc load``: read a document into a new conversation, then ask with ``hearth send``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from app.commands import UserError, engine_for
from app.store_access import command_writer, open_conversations, store_errors
from app.documents import (
    DocumentTooLong, StoredDocument, check_fit, fit_command, keep_if_read, read_command, reading_speed, store_document,
)
from app.settings import app_data_dir
from engine import protocol as p
from engine.client import EngineClient, EngineDead
from model_store.conversations import ConversationStore
from model_store.documents import DocumentStore
from model_store.extract import DocumentError, extract_text

LOAD_WHO = "a `hearth doc load` command"


def _one(client: EngineClient, command: p.Command, kind: type, on_event=None):
    """Run ``command`` and return its result event of type ``kind``; errors become UserError."""
    result, errors = None, []
    for event in client.stream(command):
        if on_event is not None:
            on_event(event)
        if isinstance(event, kind):
            result = event
        elif isinstance(event, p.Error):
            errors.append(event.message)
        elif isinstance(event, EngineDead):
            raise UserError(event.message)
    if errors:
        raise UserError("; ".join(errors))
    return result


def _read(client: EngineClient, store: ConversationStore, documents: DocumentStore, stored: StoredDocument,
          *, quiet: bool) -> p.DocumentRead:
    """Read the stored document; Ctrl+C cancels the reading. A document not read to the end is
    taken back out of the store (see :func:`app.documents.keep_if_read`)."""
    command = read_command(store, stored.conversation.id, stored.message.id)
    done: p.DocumentRead | None = None
    try:
        with _ctrl_c_cancels(client, command.request_id):
            done = _one(client, command, p.DocumentRead, on_event=None if quiet else _progress)
    finally:
        kept = keep_if_read(store, documents, stored, done.finish_reason if done else None)
    if not kept:
        what = "was cancelled" if done and done.finish_reason == "cancelled" else "did not finish"
        raise UserError(f"reading {stored.document.title} {what}, so it was not added; load it again to read it")
    return done


@contextmanager
def _ctrl_c_cancels(client: EngineClient, request_id: str) -> Iterator[None]:
    """While the block runs, Ctrl+C asks the engine to cancel the request (which then ends as
    cancelled) instead of stopping the command halfway."""
    previous = signal.signal(signal.SIGINT, lambda *_: client.send(p.Cancel(request_id=request_id)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _progress(event) -> None:
    if isinstance(event, p.PromptProgress) and event.total:
        rate, eta = reading_speed(event)
        print(f"\rreading {event.processed:,}/{event.total:,} tokens, {rate:,.0f} tok/s, {eta:,.0f} s left  ",
              end="", file=sys.stderr, flush=True)


def run_doc_load(args: argparse.Namespace) -> int:
    path = Path(args.file).expanduser()
    try:
        extracted = extract_text(path)
    except DocumentError as exc:
        raise UserError(str(exc)) from exc
    store = open_conversations()
    documents = DocumentStore(store.db)
    with store_errors(store), engine_for(args.model, data_dir=app_data_dir()) as (client, _loaded):
        measured = _one(client, fit_command(extracted.text, args.part), p.TextMeasured)
        try:
            text = check_fit(extracted, measured, args.part)
        except DocumentTooLong as exc:
            raise UserError(str(exc)) from exc
        tokens = measured.tokens if args.part == "all" else measured.kept_tokens
        stored = store_document(store, documents, extracted, text, tokens, args.part, model=args.model,
                                source_path=str(path.resolve()), writer=command_writer(LOAD_WHO))
        done = _read(client, store, documents, stored, quiet=args.json)
        documents.set_tokens(stored.document, done.tokens)  # what was read, as printed below
    if not args.json:
        print(f"\nread {stored.document.title}: {done.tokens:,} tokens into conversation {stored.conversation.id}; "
              f"ask with: hearth send --conversation {stored.conversation.id} \"...\"", file=sys.stderr)
        return 0
    print(json.dumps({
        "conversation_id": stored.conversation.id,
        "document_id": stored.document.id,
        "message_id": stored.message.id,
        "title": stored.document.title,
        "pages": stored.document.pages,
        "tokens": done.tokens,
        "part": args.part,
        "timings": msgspec.to_builtins(done.timings),
        "snapshot": {"saved_bytes": done.snapshot.saved_bytes if done.snapshot else 0},
    }, ensure_ascii=False))
    return 0
