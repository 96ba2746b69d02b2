"""Loading a document from the window: what the window shows and asks at each step of the load.

The steps (extract, store, read with progress and cancel, keep or take back) are
:class:`app.services.document_flow.DocumentFlow`'s, without Qt; this controller is its screen
(:class:`~app.services.document_flow.DocumentScreen`): it starts a load when the window may, says
each step in the status line and the banner, shows the conversation, opens the dialogs, and
forwards the engine's events to the flow.

A document that does not fit is never cut silently: a dialog says by how much and what limits it,
and offers its first or its last part, or a catalogue model that reads it whole
(:mod:`ui.document_offers`). One that fits only once the context grows (the memory holds a longer
one now, :func:`app.services.document_loading.fits_once_grown`) is read whole only when the user chooses so in
the same dialog, whose first choice it is; the engine then grows the context as it reads. A new
chat whose text is already in a conversation with this model asks first whether to open that one
(:class:`~ui.views.document_progress.LoadedBeforeChoice`). Cancel stops the load at any step
(extraction included); a read that is cancelled or fails is taken back out, and the window shows
the conversation it showed before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication

from app.engine_clients.client import EngineDead
from app.engine_clients.remote.spec import REMOTE_PREFIX
from app.services.document_flow import DocumentFlow
from app.services.document_screen import LoadedBeforeAnswers, WindowChoices
from app.services.document_loading import LoadedBefore
from app.services.extract import ExtractedDocument, extract_text
from app.services.chat_rows import MessageRow, load_transcript
from engine import protocol as p
from model_store.conversations import Conversation
from ui.background import Background
from ui.controller import WINDOW, ChatController
from ui.document_offers import DocumentOffers
from ui.notices import MODEL
from ui.views.document_progress import LoadedBeforeChoice, PartChoice


class DocumentController(DocumentOffers, QObject):
    progress = Signal(int, int, float, float)  # (tokens read, of total, tok/s, seconds left)
    reading_changed = Signal(bool)  # a document is being loaded
    model_suggested = Signal(str, bool)  # (the Models page's "id:QUANT", start its download): a model reads it whole

    def __init__(self, chat: ChatController) -> None:
        super().__init__()
        self.chat = chat
        self.background = Background()
        # the load's steps (this class is their screen)
        self.flow = DocumentFlow(chat.store.submit, chat.bridge.send, self, extract=self._extract,
                                 transcript=load_transcript, writer=WINDOW)
        self.part_choice: PartChoice | None = None  # open while a document too long waits for a choice
        self.loaded_before_choice: LoadedBeforeChoice | None = None  # open while a document loaded before waits
        chat.bridge.event.connect(self._on_event)
        chat.bridge.died.connect(self._on_died)

    @property
    def busy(self) -> bool:
        return self.flow.busy

    # -- what the user starts --------------------------------------------------------------------

    def attach(self, path: Path, part: str = "all") -> bool:
        """Load the file into the current conversation (a new one if none is open)."""
        if not self._may_start() or not self.chat.before_sending():  # a remote engine: asked once per conversation
            return False
        self.flow.attach(path, part, self.chat.conversation)
        return True

    def new_chat_from(self, message_id: str) -> None:
        """A new conversation holding the same document, starting from its saved state."""
        if self.busy or self.chat.generating:
            return
        self.flow.new_chat_from(message_id, self.chat.conversation)

    def cancel(self) -> None:
        """Stop the load at whatever step it is (:meth:`DocumentFlow.cancel`)."""
        self.flow.cancel()

    def _read_part(self, document: ExtractedDocument, path: Path, part: str) -> None:
        """Load the first or last part of a document already extracted, or all of it in a longer context."""
        if self._may_start():
            self.flow.read_part(document, path, part, self.chat.conversation)

    def _may_start(self) -> bool:
        if self.busy or self.chat.generating:
            self.chat.notice.emit("warning", "Wait for the current answer or document to finish, then attach again.")
            return False
        if self.chat.loaded is None:
            self.chat.passing_notice.emit("warning", "No model is loaded yet; wait for it, then attach the document.",
                                          MODEL)
            return False
        return True

    def _extract(self, path: Path, cancelled: Callable[[], bool], on_done: Callable[[ExtractedDocument], None],
                 on_error: Callable[[Exception], None]) -> None:
        """The file's text, extracted on a thread of its own; the result comes back on this one."""
        self.background.run(lambda: extract_text(path, cancelled=cancelled), on_done, on_error)

    def _on_event(self, event: p.Event) -> None:
        self.flow.take(event)

    def _on_died(self, dead: EngineDead) -> None:
        self.flow.engine_died(dead)

    # -- the load's steps, on screen (app.services.document_flow.DocumentScreen) ------------------
    # offer_parts and offer_growing are DocumentOffers'.

    def window_choices(self) -> WindowChoices:
        chat = self.chat
        return WindowChoices(chat.model_ref, chat.settings.system_prompt, chat.thinking_choice(),
                             self._remote_engine())

    def answering(self) -> bool:
        return self.chat.generating

    def loading_changed(self, loading: bool) -> None:
        self.reading_changed.emit(loading)

    def load_status(self, text: str) -> None:
        self.chat.status.emit(text)

    def load_error(self, text: str) -> None:
        self.chat.notice.emit("error", text)

    def reading_progress(self, processed: int, total: int, rate: float, eta: float) -> None:
        self.progress.emit(processed, total, rate, eta)

    def show_conversation(self, conversation: Conversation | None, rows: list[MessageRow]) -> None:
        self.chat.show_conversation(conversation, rows)

    def refresh_list(self) -> None:
        self.chat.refresh_list()

    def show_read(self, conversation_id: str, rows: list[MessageRow]) -> None:
        """The document card shows the tokens that were read, if its conversation is still on screen."""
        if self.chat.conversation is not None and self.chat.conversation.id == conversation_id:
            self.chat.messages.set_rows(rows)

    def open_conversation(self, conversation_id: str) -> None:
        self.chat.open_conversation(conversation_id)

    def open_in_engine(self, conversation_id: str) -> None:
        self.chat.open_in_engine(conversation_id)

    def offer_loaded_before(self, document: ExtractedDocument, before: LoadedBefore,
                            answers: LoadedBeforeAnswers) -> None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(before.document.created_at))
        choice = LoadedBeforeChoice(
            f"The same text as {document.title} is already in the conversation “{before.conversation.title}” "
            f"(read {when}, {before.document.tokens:,} tokens). Open that conversation and ask there, or read it "
            "again into a new one?", QApplication.activeWindow())
        choice.open_chosen.connect(answers.open_it)
        choice.again_chosen.connect(answers.read_again)
        choice.dropped.connect(answers.add_nothing)
        choice.finished.connect(lambda _: setattr(self, "loaded_before_choice", None))
        self.loaded_before_choice = choice
        choice.open()

    def _remote_engine(self) -> str:
        """The remote engine the loaded model runs on, "" for this computer."""
        loaded = self.chat.loaded
        path = loaded.facts.path if loaded is not None else ""
        return path.removeprefix(REMOTE_PREFIX) if path.startswith(REMOTE_PREFIX) else ""
