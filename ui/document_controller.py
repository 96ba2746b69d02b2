"""Loading a document from the window: extract (background thread), count and fit (engine), store
(store thread), read with progress and cancel (engine), then questions are ordinary turns.

Nothing here waits: each step continues in the callback of the one before. Every step belongs to
one :class:`_Load`; a callback whose load is no longer the current one is ignored. The fit is
measured against what the open conversation leaves (its messages are counted first). A document
that does not fit is never cut silently: a dialog says by how much and what limits it, and offers
its first or its last part, or a catalogue model that reads it whole (:mod:`ui.document_offers`).
One that fits only once the context grows (the memory holds a longer one now,
:func:`app.services.documents.fits_whole`) is read whole only when the user chooses so in the same
dialog, whose first choice it is; the engine then grows the context as it reads. Cancel stops the
load at any step (extraction included); a read that is cancelled or fails takes the document back
out (:func:`app.services.documents.keep_if_read`), and the window shows the conversation it showed
before.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication

from app.services.documents import (
    DocumentTooLong, LoadedBefore, Room, StoredDocument, check_fit, copy_document, fit_command, fits_whole,
    history_command, keep_if_read, loaded_before, read_command, reading_speed, release_document, room_after,
    store_document,
)
from app.services.turn import THINKING_SETTING
from engine import protocol as p
from app.engine_clients.client import EngineDead
from app.engine_clients.remote.spec import REMOTE_PREFIX
from model_store.conversations import Conversation, ConversationStore, Message
from model_store.db import StoreError
from model_store.documents import DocumentStore
from app.services.extract import DocumentError, ExtractedDocument, extract_text
from ui.background import Background
from ui.controller import WINDOW, ChatController
from ui.document_offers import DocumentOffers
from ui.notices import MODEL
from ui.item_models.messages import MessageRow, load_transcript
from ui.views.document_progress import LoadedBeforeChoice


@dataclass
class _Load:
    """One document being loaded, from the click to the end of its reading."""

    title: str
    shown_before: Conversation | None  # the conversation on screen when it started
    cancelled: threading.Event = field(default_factory=threading.Event)  # polled by the extraction thread
    stored: StoredDocument | None = None
    read_request: str | None = None
    may_grow: bool = False  # the user chose to read all of it in a longer context


class DocumentController(DocumentOffers, QObject):
    progress = Signal(int, int, float, float)  # (tokens read, of total, tok/s, seconds left)
    reading_changed = Signal(bool)  # a document is being loaded
    model_suggested = Signal(str, bool)  # (the Models page's "id:QUANT", start its download): a model reads it whole

    def __init__(self, chat: ChatController) -> None:
        super().__init__()
        self.chat = chat
        self.background = Background()
        self._load: _Load | None = None
        self._waiting: dict[str, object] = {}  # request id -> what to do with its answer
        self.part_choice: PartChoice | None = None  # open while a document too long waits for a choice
        self.loaded_before_choice: LoadedBeforeChoice | None = None  # open while a document loaded before waits
        chat.bridge.event.connect(self._on_event)
        chat.bridge.died.connect(self._on_died)

    @property
    def busy(self) -> bool:
        return self._load is not None

    # -- steps -----------------------------------------------------------------------------------

    def attach(self, path: Path, part: str = "all") -> bool:
        """Load the file into the current conversation (a new one if none is open)."""
        if not self._may_start() or not self.chat.before_sending():  # a remote engine: asked once per conversation
            return False
        load = self._begin(path.name)
        self.chat.status.emit(f"Extracting the text of {path.name}…")
        self.background.run(lambda: extract_text(path, cancelled=load.cancelled.is_set),
                            self._step(load, lambda document: self._measure(load, document, path, part)),
                            self._step(load, self._failed))
        return True

    def new_chat_from(self, message_id: str) -> None:
        """A new conversation holding the same document, starting from its saved state."""
        if self.busy or self.chat.generating:
            return
        load = self._begin("")
        self.chat.store.submit(lambda store: _copy_document(store, message_id),
                               lambda result: self._stored(load, result), self._step(load, self._failed))

    def cancel(self) -> None:
        """Stop the load at whatever step it is. Before reading, it ends here and now: extraction
        stops at its next chunk or page, and a later result of any step is discarded (see _step);
        a document being stored is taken back out once it is. While reading, the engine stops
        between chunks and ends the read with DocumentRead(cancelled)."""
        load = self._load
        if load is None:
            return
        load.cancelled.set()
        if load.read_request is not None:
            self.chat.bridge.send(p.Cancel(request_id=load.read_request))
            return
        self._finish()
        self.chat.status.emit(f"Loading {load.title} was cancelled; nothing was added.")

    def _may_start(self) -> bool:
        if self.busy or self.chat.generating:
            self.chat.notice.emit("warning", "Wait for the current answer or document to finish, then attach again.")
            return False
        if self.chat.loaded is None:
            self.chat.passing_notice.emit("warning", "No model is loaded yet; wait for it, then attach the document.",
                                          MODEL)
            return False
        return True

    def _begin(self, title: str) -> _Load:
        self._load = _Load(title, self.chat.conversation)
        self.reading_changed.emit(True)
        return self._load

    def _step(self, load: _Load, then):
        """``then``, called only while ``load`` is still the current load."""
        return lambda *args: then(*args) if load is self._load else None

    def _measure(self, load: _Load, document: ExtractedDocument, path: Path, part: str) -> None:
        """Count the open conversation's messages (if any), then the document against what is left."""
        self.chat.status.emit(f"Counting the tokens of {document.title}…")
        conversation = load.shown_before
        if conversation is None and part == "all" and not load.may_grow:  # a new chat: is this text already in one?
            model = self.chat.model_ref
            self.chat.store.submit(
                lambda store: loaded_before(store, DocumentStore(store.db), document.text, part, model),
                self._step(load, lambda before: self._offer_or_fit(load, document, path, part, before)),
                self._step(load, self._failed))
            return
        if conversation is None:
            self._fit(load, document, path, part, Room())
            return
        self.chat.store.submit(lambda store: store.current_branch(conversation.id),
                               self._step(load, lambda history: self._count(load, document, path, part, history)),
                               self._step(load, self._failed))

    def _offer_or_fit(self, load: _Load, document: ExtractedDocument, path: Path, part: str,
                      before: LoadedBefore | None) -> None:
        """Read the document, or, if its text is already in a conversation, ask first."""
        if before is None:
            self._fit(load, document, path, part, Room())
            return
        self.chat.status.emit(f"{document.title} is already loaded.")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(before.document.created_at))
        choice = LoadedBeforeChoice(
            f"The same text as {document.title} is already in the conversation “{before.conversation.title}” "
            f"(read {when}, {before.document.tokens:,} tokens). Open that conversation and ask there, or read it "
            "again into a new one?", QApplication.activeWindow())
        choice.open_chosen.connect(lambda: self._open_loaded(load, before))
        choice.again_chosen.connect(self._step(load, lambda: self._fit(load, document, path, part, Room())))
        choice.dropped.connect(self._step(load, lambda: self._drop(load)))
        choice.finished.connect(lambda _: setattr(self, "loaded_before_choice", None))
        self.loaded_before_choice = choice
        choice.open()

    def _open_loaded(self, load: _Load, before: LoadedBefore) -> None:
        if load is self._load:
            self._finish()
            self.chat.status.emit("")
            self.chat.open_conversation(before.conversation.id)

    def _drop(self, load: _Load) -> None:
        """The user chose to add nothing."""
        self._finish()
        self.chat.status.emit(f"{load.title} was not added.")

    def _count(self, load: _Load, document: ExtractedDocument, path: Path, part: str, history: list[Message]) -> None:
        command = history_command(history)
        if command is None:
            self._fit(load, document, path, part, Room())
        else:
            self._ask(load, command, lambda counted: self._fit(load, document, path, part,
                                                               room_after(counted, len(history))))

    def _fit(self, load: _Load, document: ExtractedDocument, path: Path, part: str, room: Room) -> None:
        self._ask(load, fit_command(document.text, part, room),
                  lambda measured: self._store(load, document, path, part, room, measured))

    def _ask(self, load: _Load, command: p.MeasureText, then) -> None:
        """Send ``command``; ``then(TextMeasured)`` follows while ``load`` is current."""
        self._waiting[command.request_id] = self._step(load, then)
        if not self.chat.bridge.send(command):
            self._failed("the engine is not running")

    def _store(self, load: _Load, document: ExtractedDocument, path: Path, part: str, room: Room,
               measured: p.TextMeasured) -> None:
        try:
            text = check_fit(document, measured, part, room, engine=self._remote_engine())
        except DocumentTooLong as too_long:
            self._finish()
            self._offer_parts(document, path, too_long, in_conversation=room.held_tokens > 0)
            return
        if part == "all" and not measured.fits and fits_whole(measured) and not load.may_grow:
            self._finish()
            self._offer_growing(document, path, measured)
            return
        tokens = measured.tokens if part == "all" else measured.kept_tokens
        conversation_id = load.shown_before.id if load.shown_before else None
        model, system_prompt = self.chat.model_ref, self.chat.settings.system_prompt
        thinking = self.chat.thinking_choice() if conversation_id is None else None

        def store(s: ConversationStore):
            stored = store_document(s, DocumentStore(s.db), document, text, tokens, part, model=model,
                                    source_path=str(path), conversation_id=conversation_id, writer=WINDOW,
                                    system_prompt=system_prompt)
            if thinking is not None:  # a new chat keeps the "Think before answering" chosen for it (ui.thinking_choice)
                stored.conversation = s.update_settings(stored.conversation.id, {THINKING_SETTING: thinking})
            return stored, read_command(s, stored.conversation.id, stored.message.id), \
                load_transcript(s, stored.conversation.id)

        self.chat.store.submit(store, lambda result: self._stored(load, result), self._step(load, self._failed))

    def _read_part(self, document: ExtractedDocument, path: Path, part: str) -> None:
        """Load the first or last part of a document already extracted, or all of it in a longer context."""
        if self._may_start():
            load = self._begin(document.title)
            load.may_grow = part == "all"
            self._measure(load, document, path, part)

    def _stored(self, load: _Load, result: tuple[StoredDocument, p.ReadDocument | None, list[MessageRow]]) -> None:
        stored, command, rows = result
        load.stored = stored
        if load is not self._load:  # cancelled, or the engine stopped, while it was being stored
            self._take_back(load, "cancelled" if load.cancelled.is_set() else "error")
            return
        self.chat.show_conversation(stored.conversation, rows)
        self.chat.refresh_list()
        if command is None:  # a new chat from a document whose saved state was copied with it
            self._finish()
            self.chat.status.emit(f"New chat from {stored.conversation.title}: it starts from the document's saved "
                                  "state.")
            self.chat.open_in_engine(stored.conversation.id)
            return
        load.title = load.title or stored.conversation.title
        load.read_request = command.request_id
        self.chat.status.emit(f"Reading {load.title}…")
        if not self.chat.bridge.send(command):
            self._failed("the engine is not running")

    # -- events ----------------------------------------------------------------------------------

    def _on_event(self, event: p.Event) -> None:
        rid = getattr(event, "request_id", None)
        if rid in self._waiting:
            then = self._waiting.pop(rid)
            if isinstance(event, p.TextMeasured):
                then(event)
            else:
                self._failed(getattr(event, "message", "the engine could not count the document's tokens"))
        elif self._load is not None and rid is not None and rid == self._load.read_request:
            self._on_read_event(self._load, event)

    def _on_read_event(self, load: _Load, event: p.Event) -> None:
        if isinstance(event, p.PromptProgress) and event.total:
            rate, eta = reading_speed(event)
            self.progress.emit(event.processed, event.total, rate, eta)
        elif isinstance(event, p.Error):
            self.chat.notice.emit("error", event.message)
        elif isinstance(event, p.DocumentRead) and event.finish_reason == "stop":
            self._finish()
            stored, tokens = load.stored, event.tokens
            status = (f"Read {load.title}: {tokens:,} tokens in {event.timings.prompt_ms / 1000:.1f} s. Ask "
                      "anything about it; every question starts from the saved state.")
            self.chat.store.submit(lambda store: _read_to_the_end(store, stored, tokens),
                                   lambda result: self._show_read(result, status),
                                   lambda message: self.chat.notice.emit(
                                       "error", f"{load.title} was read, but saving it failed: {message}"))
        elif isinstance(event, p.DocumentRead):
            self._end_unread(load, event.finish_reason)

    def _show_read(self, result: tuple[str, list[MessageRow]], status: str) -> None:
        """The document card shows the tokens that were read (if its conversation is still on screen),
        then the status line says so."""
        conversation_id, rows = result
        if self.chat.conversation is not None and self.chat.conversation.id == conversation_id:
            self.chat.messages.set_rows(rows)
        self.chat.status.emit(status)

    def _on_died(self, dead: EngineDead) -> None:
        load = self._load
        if load is not None and load.stored is not None:
            self._end_unread(load, "error")
        else:
            self._finish()

    # -- endings ---------------------------------------------------------------------------------

    def _end_unread(self, load: _Load, finish_reason: str) -> None:
        """End a load whose document was stored but not read to the end, and say so once it is gone."""
        self._finish()
        what = "was cancelled" if finish_reason == "cancelled" else "did not finish"
        self._take_back(load, finish_reason, f"Reading {load.title} {what}; it was not added to the conversation.")

    def _take_back(self, load: _Load, finish_reason: str, status: str = "") -> None:
        """Remove the stored document (:func:`keep_if_read`) and show the conversation shown before it."""
        stored, shown = load.stored, load.shown_before

        def take_back(store: ConversationStore) -> tuple[Conversation | None, list[MessageRow]]:
            keep_if_read(store, DocumentStore(store.db), stored, finish_reason)
            return _as_it_is_now(store, shown)

        def taken_back(result: tuple[Conversation | None, list[MessageRow]]) -> None:
            self.chat.refresh_list()
            if self._load is None and not self.chat.generating:  # nothing newer is on screen
                self.chat.show_conversation(*result)
                if status:
                    self.chat.status.emit(status)

        self.chat.store.submit(take_back, taken_back, lambda message: self.chat.notice.emit(
            "error", f"{load.title} could not be taken back out of the conversation: {message}"))

    def _remote_engine(self) -> str:
        """The remote engine the loaded model runs on, "" for this computer."""
        loaded = self.chat.loaded
        path = loaded.facts.path if loaded is not None else ""
        return path.removeprefix(REMOTE_PREFIX) if path.startswith(REMOTE_PREFIX) else ""

    def _failed(self, problem) -> None:
        message = str(problem)
        if not isinstance(problem, (DocumentError, str)):
            message = f"Could not load the document: {problem}"
        load = self._load
        self._finish()
        self.chat.status.emit("")
        self.chat.notice.emit("error", message)
        if load is not None and load.stored is not None:
            self._take_back(load, "error")

    def _finish(self) -> None:
        self._load = None
        self._waiting.clear()
        self.reading_changed.emit(False)


def _read_to_the_end(store: ConversationStore, stored: StoredDocument, tokens: int) -> tuple[str, list[MessageRow]]:
    """Record the tokens read, let the next writer in; the conversation's id and transcript."""
    try:
        DocumentStore(store.db).set_tokens(stored.document, tokens)
    finally:
        release_document(store, stored)
    return stored.conversation.id, load_transcript(store, stored.conversation.id)


def _as_it_is_now(store: ConversationStore, conversation: Conversation | None) -> tuple[Conversation | None,
                                                                                      list[MessageRow]]:
    """The conversation and its transcript as stored now (None, [] if there is none, or no longer)."""
    if conversation is None:
        return None, []
    try:
        return store.get(conversation.id), load_transcript(store, conversation.id)
    except StoreError:
        return None, []


def _copy_document(store: ConversationStore, message_id: str):
    stored, command = copy_document(store, message_id)
    return stored, command, load_transcript(store, stored.conversation.id)
