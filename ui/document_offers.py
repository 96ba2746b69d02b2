"""What the window offers when a document does not fit the model's context as it is: its first or
last part, all of it in a context that grows, or a catalogue model that reads it whole.

The choice of model and of advice is :mod:`app.services.model_suggestion`'s (the command line's too);
here it is worded for the dialog (:class:`~ui.views.document_progress.PartChoice`), whose button for
the suggested model opens the Models page on it and starts its download
(:attr:`ui.document_controller.DocumentController.model_suggested`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.services.document_loading import DocumentTooLong
from app.services.model_suggestion import (
    TRAINED, ModelSuggestion, limit_words, needed_tokens, suggest_model, what_limits,
)
from app.services.model_refs import app_catalogue
from app.services.paths import user_paths
from engine import protocol as p
from model_store.catalogue import CatalogueError
from model_store.conversations import ConversationStore
from model_store.download_errors import format_bytes
from app.services.extract import ExtractedDocument
from model_store.installed import ModelLibrary
from ui.remote_text import answering_model
from ui.views.document_progress import PartChoice


class DocumentOffers:
    """The dialogs of :class:`~ui.document_controller.DocumentController` for a document that does
    not fit (its :class:`~app.services.document_flow.DocumentScreen` offers): a choice is read by
    ``_read_part``; ``part_choice`` is the dialog while it is open."""

    def offer_parts(self, document: ExtractedDocument, path: Path, too_long: DocumentTooLong, *,
                    in_conversation: bool) -> None:
        """Offer its parts and, found on the store thread, a catalogue model that reads it whole."""
        self.chat.status.emit(f"{document.title} does not fit the model's context.")
        loaded = self.chat.loaded
        report, name = (loaded.context, answering_model(self.chat.model_ref, loaded)) if loaded else (None, "")
        percent = self.chat.settings.memory_budget_percent

        def offer(suggestion: ModelSuggestion | None) -> None:
            if self.busy:  # another document is being loaded meanwhile
                return
            choice = PartChoice(too_long_text(too_long, report, name, suggestion, in_conversation=in_conversation),
                                QApplication.activeWindow(),
                                model_button=suggestion_button_text(suggestion) if suggestion else "")
            if suggestion is not None:
                choice.model_chosen.connect(lambda: self.model_suggested.emit(models_page_ref(suggestion),
                                                                              suggestion.installed_id is None))
            self._open_part_choice(choice, document, path)

        self.chat.store.submit(lambda store: find_suggestion(store, too_long, report, percent), offer,
                               lambda _message: offer(None))

    def offer_growing(self, document: ExtractedDocument, path: Path, room: p.DocumentRoom, part_tokens: int) -> None:
        """All of the document fits in a context the memory holds now, not in the one the model has."""
        self.chat.status.emit(f"{document.title} needs a longer context.")
        self._open_part_choice(PartChoice(
            f"{document.title} has {room.tokens:,} tokens but this model's context leaves room for "
            f"{room.budget_tokens:,}. The memory available now holds a context long enough for all of it: "
            f"the model's context grows as the document is read, taking more memory.\n\nOr read only as much of "
            f"its beginning or its end as fits ({part_tokens:,} tokens, the room less the document's title).",
            QApplication.activeWindow(),
            whole_tokens=room.tokens), document, path)

    def _open_part_choice(self, choice: PartChoice, document: ExtractedDocument, path: Path) -> None:
        choice.part_chosen.connect(lambda part: self._read_part(document, path, part))
        choice.finished.connect(lambda _: setattr(self, "part_choice", None))
        self.part_choice = choice
        choice.open()


def find_suggestion(store: ConversationStore, too_long: DocumentTooLong, report: p.ContextReport | None,
                    percent: int) -> ModelSuggestion | None:
    """The catalogue model that reads the document whole here (runs on the store thread: it reads the
    installed models); None for a remote engine, or when none would or the catalogue cannot be read."""
    if too_long.remote or report is None:
        return None
    try:
        catalogue = app_catalogue(user_paths().cache)
    except CatalogueError:
        return None
    return suggest_model(catalogue, needed_tokens(too_long.tokens, too_long.held_tokens), report.available_bytes,
                         percent=percent, installed=ModelLibrary(store.db).registered())


def too_long_text(too_long: DocumentTooLong, report: p.ContextReport | None, model_name: str,
                  suggestion: ModelSuggestion | None, *, in_conversation: bool) -> str:
    """The dialog's text: by how much, what limits it, what would read all of it, and the parts."""
    limit = what_limits(report, needed_tokens(too_long.tokens, too_long.held_tokens))
    new_chat = " start a new chat with it," if in_conversation else ""
    if too_long.remote:
        summary, whole = too_long.summary, "choose a model with a longer context"
    elif limit == TRAINED:
        summary = f"{too_long.summary}, because {limit_words(limit, model_name, report)}"
        whole = "choose a model with a longer context"
    else:
        summary = too_long.summary
        whole = ("free some memory (or turn on \"Halve the memory a conversation uses\" in Settings → Advanced), or "
                 "choose a model that reads more at once or has a smaller file")
    offer = f" {suggestion.reads_whole()}." if suggestion is not None else ""
    return (f"{summary}.\n\nTo read all of it,{new_chat} {whole}.{offer} Or read only as much of its beginning "
            "or its end as fits.")


def suggestion_button_text(suggestion: ModelSuggestion) -> str:
    """"Download LFM2 350M (218.7 MiB)", or for one installed already, "Show LFM2 350M in Models"."""
    if suggestion.installed_id:
        return f"Show {suggestion.name} in Models"
    return f"Download {suggestion.name} ({format_bytes(suggestion.download_bytes)})"


def models_page_ref(suggestion: ModelSuggestion) -> str:
    """How the Models page names the suggested file: ``id:QUANT``."""
    return f"{suggestion.entry.id}:{suggestion.file.quant}"
