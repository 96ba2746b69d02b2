"""``hearth doc load``: read a document into a new conversation, then ask with ``hearth send``."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from app.surfaces.cli.commands import UserError, engine_for
from app.surfaces.cli.document_too_long import too_long_error
from app.surfaces.cli.store_access import command_writer, open_conversations, store_errors
from app.services.document_loading import (
    DocumentTooLong, LoadedBefore, StoredDocument, check_fit, fit_command, keep_if_read, loaded_before, read_command,
    reading_speed, sendable, store_document, too_long,
)
from app.services.settings import app_data_dir, current_settings
from app.surfaces.cli.terminal_text import json_text, visible
from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineDead
from model_store.conversations import ConversationStore
from model_store.documents import DocumentStore
from app.services.extract import DocumentError, extract_text

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
          *, quiet: bool) -> p.DocumentRead | None:
    """Read the stored document; Ctrl+C cancels the reading (then None, once one line said so). A
    document not read to the end is taken back out of the store (see
    :func:`app.services.document_loading.keep_if_read`)."""
    command = read_command(store, stored.conversation.id, stored.message.id)
    done: p.DocumentRead | None = None
    progress = None if quiet else ReadingProgress()
    try:
        with _ctrl_c_cancels(client, command.request_id):
            done = _one(client, command, p.DocumentRead, on_event=progress)
    finally:
        if progress is not None:
            progress.end_line()
        kept = keep_if_read(store, documents, stored, done.finish_reason if done else None)
    if done is not None and done.finish_reason == "cancelled":
        print(f"hearth: stopped reading {visible(stored.document.title)}; nothing was added", file=sys.stderr)
        return None
    if done is not None and done.finish_reason == "too_long" and done.room is not None:
        return done  # taken back out: the caller says by how much and what to do
    if not kept:
        raise UserError(f"reading {stored.document.title} did not finish, so it was not added; load it again to "
                        "read it")
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


class ReadingProgress:
    """How far a read is, on stderr: one line rewritten in place on a terminal; otherwise (a log, a
    pipe) a new line at most every :data:`LOG_EVERY_S` seconds, so a log gets lines, not one
    line of thousands of carriage returns."""

    LOG_EVERY_S = 5.0

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.in_place = self.stream.isatty()
        self._last = -self.LOG_EVERY_S
        self._open_line = False  # a line rewritten in place is on screen, not yet ended

    def end_line(self) -> None:
        """End the line rewritten in place (if one is shown), so what is printed next starts a line of its own."""
        if self._open_line:
            print(file=self.stream, flush=True)
            self._open_line = False

    def __call__(self, event) -> None:
        if not isinstance(event, p.PromptProgress) or not event.total:
            return
        rate, eta = reading_speed(event)
        line = f"reading {event.processed:,}/{event.total:,} tokens, {rate:,.0f} tok/s, {eta:,.0f} s left"
        if self.in_place:
            print(f"\r{line}  ", end="", file=self.stream, flush=True)
            self._open_line = True
            return
        now = time.monotonic()
        if now - self._last >= self.LOG_EVERY_S or event.processed == event.total:
            self._last = now
            print(line, file=self.stream, flush=True)


def run_doc_load(args: argparse.Namespace) -> int:
    path = Path(args.file).expanduser()
    try:
        extracted = extract_text(path)
    except DocumentError as exc:
        raise UserError(exc.in_command) from exc  # the path as typed, and what to pass instead
    store = open_conversations()
    documents = DocumentStore(store.db)
    with store_errors(store):
        if not args.again and args.part == "all":  # all of it is what would be read: known before any engine starts
            if (before := loaded_before(store, documents, extracted.text, "all", args.model)) is not None:
                return _say_loaded_before(args, before)
        with engine_for(args.model, data_dir=app_data_dir(), context=args.context,
                        engine=args.engine) as (client, loaded):
            text, tokens = _text_to_read(client, extracted, args, loaded)
            if args.part != "all" and not args.again and \
                    (before := loaded_before(store, documents, text, args.part, args.model)) is not None:
                return _say_loaded_before(args, before)
            stored = store_document(store, documents, extracted, text, tokens, args.part, model=args.model,
                                    source_path=str(path.resolve()), writer=command_writer(LOAD_WHO),
                                    system_prompt=current_settings().system_prompt)
            done = _read(client, store, documents, stored, quiet=args.json)
            if done is None:  # stopped by Ctrl+C: the shell's code for a command stopped so
                return 130
            if done.finish_reason == "too_long":
                error = too_long(extracted.title, done.room, engine=args.engine or "")
                raise too_long_error(error, args, loaded)
            document = documents.set_tokens(stored.document, done.tokens)  # what was read, as printed below
    if not args.json:
        print(f"read {visible(document.title)}: {document.tokens:,} tokens into conversation "
              f"{stored.conversation.id} (\"{visible(stored.conversation.title)}\"); ask with: "
              f"hearth send --conversation {stored.conversation.id} \"...\"", file=sys.stderr)
        return 0
    print(json_text(_load_json(document, stored.conversation, stored.message.id, done.timings,
                               done.snapshot.saved_bytes if done.snapshot else 0, loaded_before=False)))
    return 0


def _text_to_read(client: EngineClient, extracted, args: argparse.Namespace, loaded) -> tuple[str, int]:
    """The text to store and read, and its tokens where known: all of it (the read measures it), or the
    first or last part the engine cut; a text too big to send is refused here, with its numbers."""
    if args.part == "all" and sendable(extracted.text):
        return extracted.text, 0
    measured = _one(client, fit_command(extracted.text, args.part), p.TextMeasured)
    try:
        return check_fit(extracted, measured, args.part, engine=args.engine or ""), measured.kept_tokens
    except DocumentTooLong as exc:
        raise too_long_error(exc, args, loaded) from exc


def _say_loaded_before(args: argparse.Namespace, before: LoadedBefore) -> int:
    """The same text is already in a conversation: point to it instead of reading a copy."""
    document, conversation = before.document, before.conversation
    if args.json:
        print(json_text(_load_json(document, conversation, document.message_id, p.Timings(), 0, loaded_before=True)))
        return 0
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(document.created_at))
    print(f"{visible(document.title)} is already loaded ({document.tokens:,} tokens, {when}) in conversation "
          f"{conversation.id} (\"{visible(conversation.title)}\"); ask with: hearth send --conversation "
          f"{conversation.id} \"...\", or add --again to read it into a new conversation", file=sys.stderr)
    return 0


def _load_json(document, conversation, message_id: str, timings: p.Timings, saved_bytes: int, *,
               loaded_before: bool) -> dict:
    """The object ``doc load --json`` prints; ``loaded_before`` says the document was not read again."""
    return {
        "conversation_id": conversation.id,
        "document_id": document.id,
        "message_id": message_id,
        "title": document.title,
        "pages": document.pages,
        "tokens": document.tokens,
        "part": document.part,
        "timings": msgspec.to_builtins(timings),
        "snapshot": {"saved_bytes": saved_bytes},
        "loaded_before": loaded_before,
    }
