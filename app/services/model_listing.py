"""The catalogue and the installed models as one listing, with RAM-fit advice for this machine.

Shared by ``hearth models list`` (JSON and text) and the GUI's Models page, so both say the same.
Imported EAGLE-3 heads are listed apart, each with the installed models it fits
(:mod:`model_store.eagle3_heads`).
"""

from __future__ import annotations

from model_store.catalogue import Catalogue, CatalogueEntry
from model_store.fit import ADVICE_CONTEXT, DEFAULT_BUDGET_PERCENT, advise, available_memory, context_here
from model_store.eagle3_heads import HeadTarget, read_shape
from model_store.installed import InstalledModel, embedded_model

FIT_LABELS = {"fits": "fits", "tight": "tight", "too_big": "too big"}


def entry_json(entry: CatalogueEntry, installed: list[InstalledModel], context: int | None,
               available: int, percent: int = DEFAULT_BUDGET_PERCENT) -> dict:
    """One catalogue model; per variant its fit at ``context`` tokens and the context it can use here
    (:func:`model_store.fit.context_here`): ``max_context_tokens``, what ``percent`` % of the available
    memory holds capped at the trained length (the entry's ``context_length``), and
    ``transformer_max_context_tokens``, the same for a transformer of equal size; the memory figures
    behind them, uncapped (headroom, not context), are ``memory_context_tokens`` and
    ``transformer_memory_context_tokens``."""
    tokens = min(context or ADVICE_CONTEXT, entry.context_length)
    fits = {fit.quant: fit for fit in advise(entry, tokens, available)}
    ids = {(m.catalogue_id, (m.quant or "").upper()): m.id for m in installed if m.catalogue_id and not m.missing}
    variants = []
    for file in entry.files:
        fit = fits[file.quant]
        here, transformer = context_here(entry, file.size_bytes, available, percent)
        variants.append({"quant": file.quant, "filename": file.filename, "size_bytes": file.size_bytes,
                         "size_estimated": file.size_estimated, "fit": fit.verdict, "needed_bytes": fit.needed_bytes,
                         "recommended": fit.recommended, "installed_id": ids.get((entry.id, file.quant.upper())),
                         "max_context_tokens": here.tokens, "transformer_max_context_tokens": transformer.tokens,
                         "memory_context_tokens": here.memory_tokens,
                         "transformer_memory_context_tokens": transformer.memory_tokens})
    return {"id": entry.id, "name": entry.name, "repo_id": entry.repo_id, "revision": entry.revision,
            "architecture": entry.architecture, "context_length": entry.context_length, "has_mtp": entry.has_mtp,
            "draft": entry.draft, "licence": entry.licence, "description": entry.description,
            "good_for": entry.good_for,
            "recommended_quant": entry.recommended_quant, "context_tokens": tokens, "variants": variants}


def context_words(tokens: int, memory_tokens: int, width: int = 0) -> str:
    """A context a model can use, in words: ``"190,208 tokens"`` where memory is the limit, and where
    memory would hold more, ``"262,144 tokens, its trained maximum (memory would hold 1,293,056)"``:
    the memory figure is headroom, never the context. ``width``: the number right-aligned in so many
    characters."""
    text = f"{tokens:>{width},} tokens"
    return f"{text}, its trained maximum (memory would hold {memory_tokens:,})" if memory_tokens > tokens else text


def installed_json(model: InstalledModel) -> dict:
    return {"id": model.id, "name": model.name, "path": str(model.path), "size_bytes": model.size_bytes,
            "source": model.source, "catalogue_id": model.catalogue_id, "quant": model.quant,
            "architecture": model.architecture, "missing": model.missing}


def fitting_ids(head: HeadTarget, installed: list[InstalledModel]) -> list[str]:
    """The ids of the models ``head`` fits: the embedded one, then registered ones whose files are there
    (each read for its hidden size and layer count)."""
    embedded = embedded_model()
    models = ([embedded] if embedded is not None else []) + [m for m in installed if m.id and not m.missing]
    return [m.id for m in models if m.head is None and head.fits(read_shape(m.path))]


def head_json(head: InstalledModel, installed: list[InstalledModel]) -> dict:
    """An imported EAGLE-3 head: the model it was made for and the installed models it fits (``fits``)."""
    target = head.head
    return {"id": head.id, "name": head.name, "path": str(head.path), "size_bytes": head.size_bytes,
            "missing": head.missing, "target_hidden_size": target.hidden_size, "target_layers": list(target.layers),
            "drafts_for": target.words(), "fits": [] if head.missing else fitting_ids(target, installed)}


def listing_json(catalogue: Catalogue, installed: list[InstalledModel], context: int | None = None,
                 available: int | None = None, percent: int = DEFAULT_BUDGET_PERCENT,
                 heads: list[InstalledModel] = ()) -> dict:
    """``available`` memory in bytes; None reads it from this machine. ``installed`` are the models
    the user added (each removable); ``embedded`` is the model that comes with Hearth (None if its
    package is missing); ``eagle3_heads`` the imported EAGLE-3 heads (:func:`head_json`)."""
    available = available_memory() if available is None else available
    embedded = embedded_model()
    return {"available_memory_bytes": available,
            "memory_budget_percent": percent,
            "catalogue": [entry_json(entry, installed, context, available, percent) for entry in catalogue],
            "installed": [installed_json(model) for model in installed],
            "embedded": installed_json(embedded) if embedded is not None else None,
            "eagle3_heads": [head_json(head, installed) for head in heads]}
