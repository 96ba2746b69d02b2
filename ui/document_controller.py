"""Loading a document from the window: extract (background thread), count and fit (engine), store
(store thread), read with progress and cancel (engine), then questions are ordinary turns.

Nothing here waits: each step continues in the callback of the one before. A document that does
not fit is never cut silently: the banner says by how much and offers to read its first part.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.documents import DocumentTooLong, check_fit, fit_command, read_command, reading_speed, store_document
from engine import protocol as p
from model_store.conversations import ConversationStore
from model_store.documents import DocumentStore
from model_store.extract import DocumentError, ExtractedDocument, extract_text
from model_store.snapshots import SnapshotStore
from ui.background import Background
from ui.controller import ChatController
from ui.models.messages import load_transcript


class DocumentController(QObject):
    progress = Signal(int, int, float, float)  # (tokens read, of total, tok/s, seconds left)
    reading_changed = Signal(bool)  # a document is being loaded

    def __init__(self, chat: ChatController) -> None:
        super().__init__()
        self.chat = chat
        self.background = Background()
        self.busy = False
        self._waiting: dict[str, object] = {}  # request id -> what to do with its answer
        self._read_request: str | None = None
        self._title = ""
        chat.bridge.event.connect(self._on_event)
        chat.bridge.died.connect(lambda _: self._finish())

    # -- steps -----------------------------------------------------------------------------------

    def attach(self, path: Path, part: str = "all") -> bool:
        """Load the file into the current conversation (a new one if none is open)."""
        if self.busy or self.chat.generating:
            self.chat.notice.emit("warning", "Wait for the current answer or document to finish, then attach again.")
            return False
        if self.chat.loaded is None:
            self.chat.notice.emit("warning", "No model is loaded yet; wait for it, then attach the document.")
            return False
        self._set_busy(True)
        self._title = path.name
        self.chat.status.emit(f"Extracting the text of {path.name}…")
        self.background.run(lambda: extract_text(path), lambda doc: self._measure(doc, path, part), self._failed)
        return True

    def new_chat_from(self, message_id: str) -> None:
        """A new conversation holding the same document, starting from its saved state."""
        if self.busy or self.chat.generating:
            return
        self._set_busy(True)
        self._title = ""
        self.chat.store.submit(lambda store: _copy_document(store, message_id), self._stored, self._failed)

    def cancel(self) -> None:
        if self._read_request is not None:
            self.chat.bridge.send(p.Cancel(request_id=self._read_request))

    def _measure(self, document: ExtractedDocument, path: Path, part: str) -> None:
        command = fit_command(document.text, part)
        self._waiting[command.request_id] = lambda measured: self._store(document, path, part, measured)
        self.chat.status.emit(f"Counting the tokens of {document.title}…")
        if not self.chat.bridge.send(command):
            self._failed("the engine is not running")

    def _store(self, document: ExtractedDocument, path: Path, part: str, measured: p.TextMeasured) -> None:
        try:
            text = check_fit(document, measured, part)
        except DocumentTooLong:
            self._finish()
            over = measured.tokens - measured.budget_tokens
            self._offer_part(path, document.title, measured.tokens, measured.budget_tokens, over)
            return
        tokens = measured.tokens if part == "all" else measured.kept_tokens
        conversation_id = self.chat.conversation.id if self.chat.conversation else None
        model = self.chat.model_ref

        def store(s: ConversationStore):
            stored = store_document(s, DocumentStore(s.db), document, text, tokens, part, model=model,
                                    source_path=str(path), conversation_id=conversation_id)
            return stored.conversation, read_command(s, stored.conversation.id, stored.message.id), \
                load_transcript(s, stored.conversation.id)

        self.chat.store.submit(store, self._stored, self._failed)

    def _stored(self, result) -> None:
        conversation, command, rows = result
        self.chat.show_conversation(conversation, rows)
        self.chat.refresh_list()
        if command is None:  # a new chat from a document whose saved state was copied with it
            self._finish()
            self.chat.status.emit(f"New chat from {conversation.title}: it starts from the document's saved state.")
            self.chat.open_in_engine(conversation.id)
            return
        self._title = conversation.title if not self._title else self._title
        self._read_request = command.request_id
        self._started = time.monotonic()
        self.chat.status.emit(f"Reading {self._title}…")
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
        elif rid is not None and rid == self._read_request:
            self._on_read_event(event)

    def _on_read_event(self, event: p.Event) -> None:
        if isinstance(event, p.PromptProgress) and event.total:
            rate, eta = reading_speed(event)
            self.progress.emit(event.processed, event.total, rate, eta)
        elif isinstance(event, p.Error):
            self.chat.notice.emit("error", event.message)
        elif isinstance(event, p.DocumentRead):
            self._finish()
            if event.finish_reason == "stop":
                self.chat.status.emit(f"Read {self._title}: {event.tokens:,} tokens in "
                                      f"{event.timings.prompt_ms / 1000:.1f} s. Ask anything about it; every "
                                      "question starts from the saved state.")
            elif event.finish_reason == "cancelled":
                self.chat.status.emit(f"Reading {self._title} was cancelled; nothing was saved, and a question "
                                      "will read the document again.")

    # -- endings ---------------------------------------------------------------------------------

    def _offer_part(self, path: Path, title: str, tokens: int, budget: int, over: int) -> None:
        self.chat.notice_with_action.emit(
            "warning",
            f"{title} has {tokens:,} tokens but this model's context leaves room for {budget:,} ({over:,} too "
            "many). Choose a model with a longer context, or read only the first part.",
            "Read the first part", lambda: self.attach(path, "first"))

    def _failed(self, problem) -> None:
        message = str(problem)
        if not isinstance(problem, (DocumentError, str)):
            message = f"Could not load the document: {problem}"
        self._finish()
        self.chat.status.emit("")
        self.chat.notice.emit("error", message)

    def _finish(self) -> None:
        self._read_request = None
        self._waiting.clear()
        self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.reading_changed.emit(busy)


def _copy_document(store: ConversationStore, message_id: str):
    """A new conversation with the document's message, its record and (when it stands alone) its snapshot."""
    documents = DocumentStore(store.db)
    source = documents.for_message(message_id)
    message = store.message(message_id)
    conversation = store.create(source.title if source else "Document", model=store.get(message.conversation_id).model)
    copy = store.add_message(conversation.id, "user", message.content, parent_id=None)
    if source is not None:
        documents.copy_to(source, conversation.id, copy.id)
    copied = SnapshotStore(store.db).copy_root(message_id, conversation.id, copy.id)
    command = read_command(store, conversation.id, copy.id)
    return conversation, (None if copied else command), load_transcript(store, conversation.id)
