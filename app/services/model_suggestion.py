"""What to say when a document is too long for the model loaded: what limits it, and which catalogue
model would read it whole on this machine. The one place for this choice: ``hearth doc load``
(:mod:`app.surfaces.cli.document_commands`) and the window's dialog (:mod:`ui.document_controller`) both ask here.

What limits it. A document needs its own tokens, the conversation's before it, and room for a
question and its answer (:func:`needed_tokens`, the room the worker keeps: engine.protocol.document_room).
Where that is more than the model was trained on, no memory helps: the limit is the model's trained
length (:data:`TRAINED`), and only another model reads it whole. Otherwise the memory available holds
the context short (:data:`MEMORY`), and freeing some (or the 8-bit KV cache) is the advice.

Which model. Among the catalogue's files, those whose context on this machine holds what the document
needs: :func:`model_store.fit.context_here`, what the memory budget holds capped at the trained length,
which is the automatic context the worker would give that file. One already installed comes first (no
download); else the smallest download. None when no catalogue model would hold it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.protocol.document_room import ANSWER_ROOM, TEMPLATE_ROOM
from engine.protocol.reports import ContextReport
from model_store.catalogue import Catalogue, CatalogueEntry, CatalogueFile
from model_store.download_errors import format_bytes
from model_store.fit import DEFAULT_BUDGET_PERCENT, context_here
from model_store.installed import InstalledModel

TRAINED, MEMORY = "trained", "memory"  # what holds the context short: the model's trained length, or the memory


def needed_tokens(document_tokens: int, held_tokens: int = 0) -> int:
    """The context a document needs: itself, what the conversation holds before it, and room after it."""
    return document_tokens + held_tokens + ANSWER_ROOM + TEMPLATE_ROOM


def what_limits(report: ContextReport | None, needed: int) -> str:
    """:data:`TRAINED` when ``needed`` tokens are more than the model was trained on, else :data:`MEMORY`."""
    trained = report.n_ctx_train if report is not None else 0
    return TRAINED if trained and needed > trained else MEMORY


@dataclass(frozen=True)
class ModelSuggestion:
    """A catalogue model that reads the document whole here."""

    entry: CatalogueEntry
    file: CatalogueFile
    context_tokens: int  # the context it would have on this machine
    installed_id: str | None = None  # its id when it is installed already (nothing to download)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def ref(self) -> str:
        """What ``hearth models pull`` and ``--model`` take: the id, with the quantization when it is not the
        recommended one."""
        if self.file.quant.upper() == self.entry.recommended_quant.upper():
            return self.entry.id
        return f"{self.entry.id}:{self.file.quant}"

    @property
    def model_ref(self) -> str:
        """What ``--model`` takes for it (after the download, when it is not installed)."""
        return self.installed_id or self.ref

    @property
    def download_bytes(self) -> int:
        return 0 if self.installed_id else self.file.size_bytes

    def reads_whole(self) -> str:
        """"LFM2 350M reads it whole on this machine (trained on 32,768 tokens; a 219 MiB download)"."""
        size = "installed already" if self.installed_id else f"a {format_bytes(self.file.size_bytes)} download"
        return (f"{self.name} reads it whole on this machine (trained on {self.entry.context_length:,} tokens; "
                f"{size})")


def suggest_model(catalogue: Catalogue, needed: int, available_bytes: int, *,
                  percent: int = DEFAULT_BUDGET_PERCENT,
                  installed: Iterable[InstalledModel] = ()) -> ModelSuggestion | None:
    """The catalogue model that would read ``needed`` tokens whole with ``available_bytes`` of memory
    (``percent`` % of it for an automatic context): an installed one first, else the smallest download."""
    have = {(m.catalogue_id, (m.quant or "").upper()): m.id for m in installed if m.catalogue_id and not m.missing}
    fitting = []
    for entry in catalogue:
        for file in entry.files:
            here, _ = context_here(entry, file.size_bytes, available_bytes, percent)
            if here.tokens >= needed:
                fitting.append(ModelSuggestion(entry, file, here.tokens, have.get((entry.id, file.quant.upper()))))
    return min(fitting, key=lambda s: (s.installed_id is None, s.file.size_bytes), default=None)


def limit_words(limit: str, model_name: str, report: ContextReport | None) -> str:
    """Why the context cannot hold it, in words: the model's trained length, or the memory."""
    if limit == TRAINED and report is not None:
        return f"{model_name} was trained on {report.n_ctx_train:,} tokens at most (the model's limit, not the memory's)"
    return f"the memory available now holds no longer context for {model_name}"
