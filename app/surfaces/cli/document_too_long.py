"""What ``hearth doc load`` says about a document too long for the model: by how much, what limits it
(the model's trained length or the memory: :mod:`app.services.model_suggestion`), the catalogue model
that would read it whole here with the commands that get and use it, and the parts that fit now.

One line, as every error of the command line; ``--json`` adds the same facts to the ``error`` object
(``kind`` "too_long", ``limit``, and with a suggestion ``suggested_model``, ``download_bytes`` and
``commands``).
"""

from __future__ import annotations

import argparse
import shlex

from app.surfaces.cli.commands import UserError
from app.services.document_loading import PARTS_WORDS, DocumentTooLong
from app.services.model_refs import app_catalogue, model_display_name, open_library
from app.services.model_suggestion import (
    MEMORY, ModelSuggestion, limit_words, needed_tokens, suggest_model, what_limits,
)
from app.services.paths import user_paths
from app.services.settings import app_data_dir, current_settings
from engine import protocol as p
from model_store.catalogue import CatalogueError
from model_store.db import StoreError


def too_long_error(too_long: DocumentTooLong, args: argparse.Namespace, loaded: p.ModelLoaded) -> UserError:
    """The error for a document the loaded model cannot read whole."""
    if too_long.remote:
        return UserError(str(too_long), kind="too_long", limit="remote")
    report = loaded.context
    needed = needed_tokens(too_long.tokens, too_long.held_tokens)
    limit = what_limits(report, needed)
    name = model_display_name(args.model, app_data_dir(), loaded.facts.name)
    clauses = [f"{too_long.summary}, because {limit_words(limit, name, report)}"]
    if limit == MEMORY:
        clauses.append("free some memory (or turn on the 8-bit KV cache) and load it again")
    suggestion = _suggestion(needed, report)
    details: dict = {"kind": "too_long", "limit": limit}
    if suggestion is not None:
        commands = get_and_use(suggestion, args)
        clauses.append(f"{suggestion.reads_whole()}: " + ", then ".join(f"`{command}`" for command in commands))
        details.update(suggested_model=suggestion.model_ref, download_bytes=suggestion.download_bytes,
                       commands=commands)
    elif limit != MEMORY:
        clauses.append("use a model with a longer context")
    return UserError("; ".join([*clauses, f"or {PARTS_WORDS}"]), **details)


def get_and_use(suggestion: ModelSuggestion, args: argparse.Namespace) -> list[str]:
    """The commands, shell-quoted, that read the document with the suggested model: its download (when it
    is not installed), then the same ``doc load`` with ``--model`` naming it."""
    again = ["hearth", "doc", "load", "--model", suggestion.model_ref]
    again += [flag for flag, on in (("--again", args.again), ("--json", args.json)) if on]
    same = shlex.join([*again, args.file])
    return [same] if suggestion.installed_id else [shlex.join(["hearth", "models", "pull", suggestion.ref]), same]


def _suggestion(needed: int, report: p.ContextReport) -> ModelSuggestion | None:
    """The catalogue model that reads ``needed`` tokens here (installed ones first); None if none would,
    or the catalogue or the list of installed models cannot be read."""
    try:
        catalogue = app_catalogue(user_paths().cache)
        library = open_library(app_data_dir())
        try:
            installed = library.list()
        finally:
            library.db.close()
    except (CatalogueError, StoreError):
        return None
    return suggest_model(catalogue, needed, report.available_bytes, percent=current_settings().memory_budget_percent,
                         installed=installed)
