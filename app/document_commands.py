"""``hearth doc load``: read a document into a new conversation, then ask with ``hearth send``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import msgspec

from app.commands import UserError, engine_for
from app.conversation_commands import open_conversations
from app.documents import DocumentTooLong, check_fit, fit_command, read_command, reading_speed, store_document
from app.settings import app_data_dir
from engine import protocol as p
from engine.client import EngineClient, EngineDead
from model_store.documents import DocumentStore
from model_store.extract import DocumentError, extract_text


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
    with engine_for(args.model, data_dir=app_data_dir()) as (client, _loaded):
        measured = _one(client, fit_command(extracted.text, args.part), p.TextMeasured)
        try:
            text = check_fit(extracted, measured, args.part)
        except DocumentTooLong as exc:
            raise UserError(str(exc)) from exc
        tokens = measured.tokens if args.part == "all" else measured.kept_tokens
        stored = store_document(store, documents, extracted, text, tokens, args.part, model=args.model,
                                source_path=str(path.resolve()))
        done = _one(client, read_command(store, stored.conversation.id, stored.message.id), p.DocumentRead,
                    on_event=None if args.json else _progress)
    if done is None or done.finish_reason != "stop":
        raise UserError("the document was not read to the end")
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
