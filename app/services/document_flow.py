"""The steps of loading a document in a window, without Qt: extract, count, fit, store, read, keep or take back.

A window never waits, so each step continues in the callback of the one before: the text is extracted
off the window's thread (``extract``: the GUI's :class:`ui.background.Background`), the store's work
runs through ``submit`` (the GUI's :class:`ui.store_thread.StoreThread`, as for
:class:`app.services.turn_flow.TurnFlow`), commands go through ``send`` (False while the engine is
down), and the engine's events come in through :meth:`DocumentFlow.take`. What the window shows or
asks is the :class:`DocumentScreen`'s part; the flow holds the one load in flight (:class:`_Load`) and
the requests it waits for, and ends it exactly once. A result of a load that is no longer current
(cancelled, failed, the engine died) is dropped (:meth:`DocumentFlow._step`), except a document stored
meanwhile, which is taken back out as soon as it is.

One load, step by step:

1. the file's text is extracted (:meth:`DocumentFlow.attach`; a part chosen later starts at step 2:
   :meth:`DocumentFlow.read_part`);
2. a new chat whose text a conversation with this model holds already asks first
   (:meth:`DocumentScreen.offer_loaded_before`); a first or last part is cut to what the last
   ``too_long`` left for it (:func:`~app.services.document_loading.part_budget`);
3. the document is stored (the conversation's one writer until its read ends), shown, and sent to be
   read: the engine measures the rendered conversation against the context, reads, and reports, in
   one task (``ReadDocument``);
4. read to the end, its tokens are recorded and the writer let go; too long (nothing is cut
   silently), cancelled, failed or cut short by the engine's death, it is taken back out
   (:func:`~app.services.document_loading.keep_if_read`: a conversation made for it is deleted) and the
   conversation shown before is shown as it is now. A document too long is offered in parts, or all
   of it in a context that grows (:meth:`DocumentScreen.offer_parts`,
   :meth:`DocumentScreen.offer_growing`).

Cancel ends a load before its reading at once; while reading, the engine ends the read
(``DocumentRead(cancelled)``). A new chat from a document copies it with its saved state, and reads it
only when there is none (:meth:`DocumentFlow.new_chat_from`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.engine_clients.client import EngineDead
from app.services.document_loading import (
    DocumentTooLong, LoadedBefore, StoredDocument, check_fit, copy_document, fit_command, fits_once_grown,
    keep_if_read, loaded_before, part_budget, read_command, reading_speed, release_document, sendable,
    store_document, too_long,
)
from app.services.document_screen import DocumentScreen, Extract, LoadedBeforeAnswers, Rows, Transcript, WindowChoices
from app.services.extract import DocumentError, ExtractedDocument
from app.services.turn import THINKING_SETTING, Writer
from app.services.turn_flow import StoreJob, Submit
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from model_store.db import StoreError
from model_store.documents import DocumentStore

StoredRead = tuple[StoredDocument, p.ReadDocument | None, Rows]  # stored, the command that reads it (if any), rows
NOT_RUNNING = "the engine is not running"


@dataclass
class _Load:
    """One document being loaded, from the click to the end of its reading."""

    title: str
    shown_before: Conversation | None  # the conversation on screen when it started
    document: ExtractedDocument | None = None  # its text, once extracted
    path: Path | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)  # polled by the extraction
    stored: StoredDocument | None = None
    read_request: str | None = None
    may_grow: bool = False  # the user chose to read all of it in a longer context


class DocumentFlow:
    """The document a window is loading (one at a time), from the click to the end of its reading."""

    def __init__(self, submit: Submit, send: Callable[[p.Command], bool], screen: DocumentScreen, *,
                 extract: Extract, transcript: Transcript, writer: Writer) -> None:
        self._submit, self._send, self._screen = submit, send, screen
        self._extract, self._transcript, self._writer = extract, transcript, writer
        self._load: _Load | None = None
        self._waiting: dict[str, Callable[[p.TextMeasured], None]] = {}  # measuring request id -> the next step
        self._part_budget: tuple[ExtractedDocument, int] | None = None  # what the last too_long left for its parts

    @property
    def busy(self) -> bool:
        return self._load is not None

    # -- what starts a load, and what stops it -----------------------------------------------------

    def attach(self, path: Path, part: str, shown_before: Conversation | None) -> None:
        """Load the file into ``shown_before`` (into a new conversation when None)."""
        load = self._begin(path.name, shown_before)
        self._screen.load_status(f"Extracting the text of {path.name}…")
        self._extract(path, load.cancelled.is_set,
                      self._step(load, lambda document: self._prepare(load, document, path, part)),
                      self._step(load, self._failed))

    def read_part(self, document: ExtractedDocument, path: Path, part: str, shown_before: Conversation | None) -> None:
        """Load the first or last part of a document already extracted, or all of it in a longer context."""
        load = self._begin(document.title, shown_before)
        load.may_grow = part == "all"
        self._prepare(load, document, path, part)

    def new_chat_from(self, message_id: str, shown_before: Conversation | None) -> None:
        """A new conversation holding the same document, starting from its saved state."""
        load, transcript = self._begin("", shown_before), self._transcript
        self._submit(lambda store: _copy_document(store, message_id, transcript),
                     lambda result: self._stored(load, result), self._step(load, self._failed))

    def cancel(self) -> None:
        """Stop the load at whatever step it is. Before reading, it ends here and now: extraction
        stops at its next chunk or page, and a later result of any step is dropped (see _step); a
        document being stored is taken back out once it is. While reading, the engine stops between
        chunks and ends the read with DocumentRead(cancelled)."""
        load = self._load
        if load is None:
            return
        load.cancelled.set()
        if load.read_request is not None:
            self._send(p.Cancel(request_id=load.read_request))
            return
        self._finish()
        self._screen.load_status(f"Loading {load.title} was cancelled; nothing was added.")

    # -- the engine's news -------------------------------------------------------------------------

    def take(self, event: p.Event) -> bool:
        """Feed an engine event to the step waiting for it; False when no step of this flow is."""
        rid = getattr(event, "request_id", None)
        if rid in self._waiting:
            then = self._waiting.pop(rid)
            if isinstance(event, p.TextMeasured):
                then(event)
            else:
                self._failed(getattr(event, "message", "the engine could not count the document's tokens"))
            return True
        load = self._load
        if load is not None and rid is not None and rid == load.read_request:
            self._follow_read(load, event)
            return True
        return False

    def engine_died(self, dead: EngineDead) -> None:
        """The worker is gone: a document stored is taken back out; any other step just ends."""
        load = self._load
        if load is not None and load.stored is not None:
            self._end_unread(load, "error")
        else:
            self._finish()

    # -- steps -------------------------------------------------------------------------------------

    def _begin(self, title: str, shown_before: Conversation | None) -> _Load:
        self._load = _Load(title, shown_before)
        self._screen.loading_changed(True)
        return self._load

    def _step(self, load: _Load, then: Callable[..., None]) -> Callable[..., None]:
        """``then``, called only while ``load`` is still the current load."""
        return lambda *args: then(*args) if load is self._load else None

    def _prepare(self, load: _Load, document: ExtractedDocument, path: Path, part: str) -> None:
        """A new chat asks first if its text is in a conversation already; then on to the reading."""
        load.document, load.path = document, path
        if load.shown_before is None and part == "all" and not load.may_grow:
            model = self._screen.window_choices().model
            self._submit(lambda store: loaded_before(store, DocumentStore(store.db), document.text, part, model),
                         self._step(load, lambda before: self._offer_or_read(load, document, path, part, before)),
                         self._step(load, self._failed))
        else:
            self._cut_or_store(load, document, path, part)

    def _offer_or_read(self, load: _Load, document: ExtractedDocument, path: Path, part: str,
                       before: LoadedBefore | None) -> None:
        """Read the document, or, if its text is already in a conversation, ask first."""
        if before is None:
            self._cut_or_store(load, document, path, part)
            return
        self._screen.load_status(f"{document.title} is already loaded.")
        self._screen.offer_loaded_before(document, before, LoadedBeforeAnswers(
            open_it=self._step(load, lambda: self._open_loaded(before)),
            read_again=self._step(load, lambda: self._cut_or_store(load, document, path, part)),
            add_nothing=self._step(load, lambda: self._drop(load))))

    def _open_loaded(self, before: LoadedBefore) -> None:
        self._finish()
        self._screen.load_status("")
        self._screen.open_conversation(before.conversation.id)

    def _drop(self, load: _Load) -> None:
        """The user chose to add nothing."""
        self._finish()
        self._screen.load_status(f"{load.title} was not added.")

    def _cut_or_store(self, load: _Load, document: ExtractedDocument, path: Path, part: str) -> None:
        """Store all of the document to be read (the engine measures it then); first have the engine
        cut a first or last part, or count a text too big to send."""
        if part == "all" and sendable(document.text):
            self._store(load, document, path, part, document.text, 0)
            return
        budget = self._part_budget[1] if self._part_budget and self._part_budget[0].text == document.text else 0
        self._screen.load_status(f"Counting the tokens of {document.title}…")
        self._ask(load, fit_command(document.text, part, budget), lambda measured: self._cut(load, measured, part))

    def _cut(self, load: _Load, measured: p.TextMeasured, part: str) -> None:
        document, path = load.document, load.path
        try:
            text = check_fit(document, measured, part, engine=self._screen.window_choices().remote_engine)
        except DocumentTooLong as error:
            self._finish()
            self._part_budget = (document, error.budget_tokens)
            self._screen.offer_parts(document, path, error, in_conversation=False)
            return
        self._store(load, document, path, part, text, measured.kept_tokens)

    def _ask(self, load: _Load, command: p.MeasureText, then: Callable[[p.TextMeasured], None]) -> None:
        """Send ``command``; ``then(TextMeasured)`` follows while ``load`` is current."""
        self._waiting[command.request_id] = self._step(load, then)
        if not self._send(command):
            self._failed(NOT_RUNNING)

    def _store(self, load: _Load, document: ExtractedDocument, path: Path, part: str, text: str, tokens: int) -> None:
        choices = self._screen.window_choices()
        self._submit(self._storing(load, document, path, part, text, tokens, choices),
                     lambda result: self._stored(load, result), self._step(load, self._failed))

    def _storing(self, load: _Load, document: ExtractedDocument, path: Path, part: str, text: str, tokens: int,
                 choices: WindowChoices) -> StoreJob:
        """The store's job: ``text`` as a message of the conversation shown before (or of a new one,
        keeping the thinking chosen for it), the command that reads it, and the conversation's rows."""
        conversation_id = load.shown_before.id if load.shown_before else None
        thinking = choices.thinking if conversation_id is None else None
        writer, transcript = self._writer, self._transcript
        grow = part != "all" or load.may_grow  # a part is cut to fit; all of it grows the context if the user chose

        def store(s: ConversationStore) -> StoredRead:
            stored = store_document(s, DocumentStore(s.db), document, text, tokens, part, model=choices.model,
                                    source_path=str(path), conversation_id=conversation_id, writer=writer,
                                    system_prompt=choices.system_prompt)
            if thinking is not None:
                stored.conversation = s.update_settings(stored.conversation.id, {THINKING_SETTING: thinking})
            return stored, read_command(s, stored.conversation.id, stored.message.id, grow=grow), \
                transcript(s, stored.conversation.id)
        return store

    def _stored(self, load: _Load, result: StoredRead) -> None:
        stored, command, rows = result
        load.stored = stored
        if load is not self._load:  # cancelled, or the engine stopped, while it was being stored
            self._take_back(load, "cancelled" if load.cancelled.is_set() else "error")
            return
        self._screen.show_conversation(stored.conversation, rows)
        self._screen.refresh_list()
        if command is None:  # a new chat from a document whose saved state was copied with it
            self._finish()
            self._screen.load_status(f"New chat from {stored.conversation.title}: it starts from the document's "
                                     "saved state.")
            self._screen.open_in_engine(stored.conversation.id)
            return
        load.title = load.title or stored.conversation.title
        load.read_request = command.request_id
        self._screen.load_status(f"Reading {load.title}…")
        if not self._send(command):
            self._failed(NOT_RUNNING)

    def _follow_read(self, load: _Load, event: p.Event) -> None:
        if isinstance(event, p.PromptProgress) and event.total:
            self._screen.reading_progress(event.processed, event.total, *reading_speed(event))
        elif isinstance(event, p.Error):
            self._screen.load_error(event.message)
        elif isinstance(event, p.DocumentRead) and event.finish_reason == "stop":
            self._read_to_the_end(load, event)
        elif isinstance(event, p.DocumentRead) and event.finish_reason == "too_long" and event.room is not None:
            self._too_long(load, event.room)
        elif isinstance(event, p.DocumentRead):
            self._end_unread(load, event.finish_reason)

    # -- endings -----------------------------------------------------------------------------------

    def _read_to_the_end(self, load: _Load, read: p.DocumentRead) -> None:
        """Record the tokens read and let the next writer in; then the card and the status line say so."""
        self._finish()
        stored, tokens, transcript = load.stored, read.tokens, self._transcript  # stored: its read was sent
        status = (f"Read {load.title}: {tokens:,} tokens in {read.timings.prompt_ms / 1000:.1f} s. Ask anything "
                  "about it; every question starts from the saved state.")

        def keep(store: ConversationStore) -> tuple[str, Rows]:
            try:
                DocumentStore(store.db).set_tokens(stored.document, tokens)
            finally:
                release_document(store, stored)
            return stored.conversation.id, transcript(store, stored.conversation.id)

        def kept(result: tuple[str, Rows]) -> None:
            self._screen.show_read(*result)
            self._screen.load_status(status)

        self._submit(keep, kept, lambda message: self._screen.load_error(
            f"{load.title} was read, but saving it failed: {message}"))

    def _too_long(self, load: _Load, room: p.DocumentRoom) -> None:
        """Nothing was read: take the document back out, and offer what can be read of it."""
        self._finish()
        document, path = load.document, load.path
        in_conversation = load.stored.message.parent_id is not None  # stored: its read was sent
        self._take_back(load, "too_long")
        self._part_budget = (document, part_budget(document.title, room))
        if fits_once_grown(room) and not load.may_grow:
            self._screen.offer_growing(document, path, room, self._part_budget[1])
            return
        error = too_long(document.title, room, engine=self._screen.window_choices().remote_engine,
                         in_conversation=in_conversation)
        self._screen.offer_parts(document, path, error, in_conversation=in_conversation)

    def _end_unread(self, load: _Load, finish_reason: str) -> None:
        """End a load whose document was stored but not read to the end, and say so once it is gone."""
        self._finish()
        what = "was cancelled" if finish_reason == "cancelled" else "did not finish"
        self._take_back(load, finish_reason, f"Reading {load.title} {what}; it was not added to the conversation.")

    def _take_back(self, load: _Load, finish_reason: str, status: str = "") -> None:
        """Remove the stored document (:func:`keep_if_read`) and show the conversation shown before it."""
        stored, shown, transcript = load.stored, load.shown_before, self._transcript

        def take_back(store: ConversationStore) -> tuple[Conversation | None, Rows]:
            keep_if_read(store, DocumentStore(store.db), stored, finish_reason)
            return _as_it_is_now(store, shown, transcript)

        def taken_back(result: tuple[Conversation | None, Rows]) -> None:
            self._screen.refresh_list()
            if self._load is None and not self._screen.answering():  # nothing newer is on screen
                self._screen.show_conversation(*result)
                if status:
                    self._screen.load_status(status)

        self._submit(take_back, taken_back, lambda message: self._screen.load_error(
            f"{load.title} could not be taken back out of the conversation: {message}"))

    def _failed(self, problem: Exception | str) -> None:
        message = str(problem)
        if not isinstance(problem, (DocumentError, str)):
            message = f"Could not load the document: {problem}"
        load = self._load
        self._finish()
        self._screen.load_status("")
        self._screen.load_error(message)
        if load is not None and load.stored is not None:
            self._take_back(load, "error")

    def _finish(self) -> None:
        self._load = None
        self._waiting.clear()
        self._screen.loading_changed(False)


def _as_it_is_now(store: ConversationStore, conversation: Conversation | None,
                  transcript: Transcript) -> tuple[Conversation | None, Rows]:
    """The conversation and its rows as stored now (None, [] if there is none, or no longer)."""
    if conversation is None:
        return None, []
    try:
        return store.get(conversation.id), transcript(store, conversation.id)
    except StoreError:
        return None, []


def _copy_document(store: ConversationStore, message_id: str, transcript: Transcript) -> StoredRead:
    stored, command = copy_document(store, message_id)
    return stored, command, transcript(store, stored.conversation.id)
