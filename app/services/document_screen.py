"""What a window does for a document load (:class:`app.services.document_flow.DocumentFlow`): the
:class:`DocumentScreen` it shows and asks through, and what it passes to the flow (the choices a stored
document keeps, the answers to "this text is already in a conversation", how to extract and show)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.services.document_loading import DocumentTooLong, LoadedBefore
from app.services.extract import ExtractedDocument
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore

Rows = list[Any]  # what the screen shows of a conversation, as ``transcript`` reads it
Transcript = Callable[[ConversationStore, str], Rows]  # a conversation's rows, read on the store's thread
# Extract a file's text off the caller's thread, polling ``cancelled``; then ``on_done(document)`` or
# ``on_error(exception)`` back on the caller's thread.
Extract = Callable[[Path, Callable[[], bool], Callable[[ExtractedDocument], None], Callable[[Exception], None]],
                   None]


@dataclass(frozen=True)
class WindowChoices:
    """What the window has chosen that a document stored now keeps."""

    model: str  # the model the conversation is for (a document loaded before is looked up with it too)
    system_prompt: str  # for a new conversation
    thinking: bool | None  # "Think before answering" for a new conversation; None: the model's default
    remote_engine: str = ""  # the remote engine the loaded model runs on ("" for this computer)


@dataclass(frozen=True)
class LoadedBeforeAnswers:
    """The answers to "this text is already in a conversation": each is dropped once the load is over."""

    open_it: Callable[[], None]  # open that conversation and ask there
    read_again: Callable[[], None]  # read it again into a new one
    add_nothing: Callable[[], None]


class DocumentScreen(Protocol):
    """What the window shows, asks and knows at each step of a load (all called on the caller's thread)."""

    def window_choices(self) -> WindowChoices:
        """The model, system prompt and thinking choice a document stored now keeps."""

    def answering(self) -> bool:
        """An answer is being written: the conversation on screen is left as it is."""

    def loading_changed(self, loading: bool) -> None:
        """A load began, or ended (however it ended)."""

    def load_status(self, text: str) -> None:
        """The status line: the step the load is at, or how it ended ("" clears it)."""

    def load_error(self, text: str) -> None:
        """What went wrong, for the user to read."""

    def reading_progress(self, processed: int, total: int, rate: float, eta: float) -> None:
        """Tokens read of the total, tokens per second, seconds left."""

    def show_conversation(self, conversation: Conversation | None, rows: Rows) -> None:
        """Show ``conversation`` (None: a new chat) with ``rows``."""

    def refresh_list(self) -> None:
        """The list of conversations changed."""

    def show_read(self, conversation_id: str, rows: Rows) -> None:
        """A document read to the end: its conversation's rows, to show if it is still on screen."""

    def open_conversation(self, conversation_id: str) -> None:
        """Open a conversation that holds the document already."""

    def open_in_engine(self, conversation_id: str) -> None:
        """A new chat shown from a document's saved state: the engine opens it."""

    def offer_loaded_before(self, document: ExtractedDocument, before: LoadedBefore,
                            answers: LoadedBeforeAnswers) -> None:
        """Ask whether to open the conversation that holds this text or to read it again."""

    def offer_parts(self, document: ExtractedDocument, path: Path, too_long: DocumentTooLong, *,
                    in_conversation: bool) -> None:
        """Offer the first or last part of a document too long (a choice comes back as ``read_part``)."""

    def offer_growing(self, document: ExtractedDocument, path: Path, room: p.DocumentRoom, part_tokens: int) -> None:
        """Offer all of a document that fits once the context grows, or its parts of ``part_tokens`` (as
        ``read_part``)."""
