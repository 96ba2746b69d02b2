"""The catalogue and the installed models as one listing, with RAM-fit advice for this machine.

Shared by ``hearth models list`` (JSON and text) and the GUI's Models page, so both say the same.
"""

from __future__ import annotations

from model_store.catalogue import Catalogue, CatalogueEntry
from model_store.fit import ADVICE_CONTEXT, DEFAULT_BUDGET_PERCENT, advise, available_memory, headroom
from model_store.installed import InstalledModel, embedded_model

FIT_LABELS = {"fits": "fits", "tight": "tight", "too_big": "too big"}


def entry_json(entry: CatalogueEntry, installed: list[InstalledModel], context: int | None,
               available: int, percent: int = DEFAULT_BUDGET_PERCENT) -> dict:
    """One catalogue model; per variant its fit at ``context`` tokens and its headroom: the context
    ``percent`` % of the available memory holds (``max_context_tokens``) and what a transformer of
    equal size would hold (``transformer_max_context_tokens``)."""
    tokens = min(context or ADVICE_CONTEXT, entry.context_length)
    fits = {fit.quant: fit for fit in advise(entry, tokens, available)}
    ids = {(m.catalogue_id, (m.quant or "").upper()): m.id for m in installed if m.catalogue_id and not m.missing}
    variants = []
    for file in entry.files:
        fit = fits[file.quant]
        longest, transformer = headroom(entry, file.size_bytes, available, percent)
        variants.append({"quant": file.quant, "filename": file.filename, "size_bytes": file.size_bytes,
                         "size_estimated": file.size_estimated, "fit": fit.verdict, "needed_bytes": fit.needed_bytes,
                         "recommended": fit.recommended, "installed_id": ids.get((entry.id, file.quant.upper())),
                         "max_context_tokens": longest, "transformer_max_context_tokens": transformer})
    return {"id": entry.id, "name": entry.name, "repo_id": entry.repo_id, "revision": entry.revision,
            "architecture": entry.architecture, "context_length": entry.context_length, "has_mtp": entry.has_mtp,
            "draft": entry.draft, "licence": entry.licence, "description": entry.description,
            "recommended_quant": entry.recommended_quant, "context_tokens": tokens, "variants": variants}


def installed_json(model: InstalledModel) -> dict:
    return {"id": model.id, "name": model.name, "path": str(model.path), "size_bytes": model.size_bytes,
            "source": model.source, "catalogue_id": model.catalogue_id, "quant": model.quant,
            "architecture": model.architecture, "missing": model.missing}


def listing_json(catalogue: Catalogue, installed: list[InstalledModel], context: int | None = None,
                 available: int | None = None, percent: int = DEFAULT_BUDGET_PERCENT) -> dict:
    """``available`` memory in bytes; None reads it from this machine. ``installed`` are the models
    the user added (each removable); ``embedded`` is the model that comes with Hearth (None if its
    package is missing)."""
    available = available_memory() if available is None else available
    embedded = embedded_model()
    return {"available_memory_bytes": available,
            "memory_budget_percent": percent,
            "catalogue": [entry_json(entry, installed, context, available, percent) for entry in catalogue],
            "installed": [installed_json(model) for model in installed],
            "embedded": installed_json(embedded) if embedded is not None else None}
