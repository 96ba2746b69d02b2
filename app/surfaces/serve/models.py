"""Which models a server answers for: the one it serves, and with ``--allow-switch`` every installed
one (their ids, as ``hearth models list`` shows them). A request names an id; a path never comes
from a request, only from the command line that started the server."""

from __future__ import annotations

import os
from pathlib import Path

from app.services.model_refs import ModelRefError, open_library, resolve_model_ref
from app.services.settings import app_data_dir
from model_store.db import StoreError
from model_store.installed import EMBEDDED_ID


class ModelRefused(Exception):
    pass


def served_model(ref: str) -> tuple[str, str]:
    """(the id requests name, the file or ``default`` the worker loads). A path serves under its name."""
    try:
        path = resolve_model_ref(ref, app_data_dir())
    except ModelRefError as exc:
        raise ModelRefused(str(exc)) from None
    model_id = Path(ref).stem if ref.endswith(".gguf") or os.sep in ref else ref
    return model_id, path


def installed_models() -> dict[str, str]:
    """Every installed model's id (a loose file's name) and file, the embedded one first."""
    models = {EMBEDDED_ID: EMBEDDED_ID}
    try:
        library = open_library(app_data_dir())
    except StoreError:
        return models
    try:
        for model in library.list():
            if not model.missing:
                models.setdefault(model.id or model.name, str(model.path))
    finally:
        library.db.close()
    return models


def model_table(ref: str, allow_switch: bool) -> dict[str, str]:
    """id -> file of the models requests may name; the served one first."""
    model_id, path = served_model(ref)
    table = {model_id: path}
    if allow_switch:
        for other_id, other_path in installed_models().items():
            table.setdefault(other_id, other_path)
    return table
