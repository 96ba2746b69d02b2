"""What ``--model REF`` names: the embedded default, a file path, or an installed model's id.

The engine loads ``default`` or a path; ids (``qwen3.5-0.8b``, ``qwen3.5-0.8b:Q8_0``, an imported
model's id, or the name of a file in the models folder) are looked up here, on the app side, in the
installed-models registry, so the worker never needs to know about the catalogue. A ref that
looks like a path (has a folder separator, ends in ``.gguf`` or exists) is always a path.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from model_store.catalogue import Catalogue, CatalogueError, load_catalogue, split_ref
from model_store.db import StoreError, database_path, open_database
from model_store.installed import EMBEDDED_NAME, ModelLibrary, embedded_model_file, models_folder

DEFAULT_MODEL = "default"


class ModelRefError(Exception):
    """The ref names no usable model; the message says what to do."""


def looks_like_path(ref: str) -> bool:
    return (os.sep in ref or "/" in ref or ref.lower().endswith(".gguf")
            or Path(ref).expanduser().exists())


def model_file(ref: str) -> str | None:
    """The file a resolved ref (``default`` or a path) loads: the embedded model's for ``default``
    (None when its package is missing: the load then says why); what per-model settings are kept by."""
    if ref != DEFAULT_MODEL:
        return ref
    try:
        return str(embedded_model_file())
    except StoreError:
        return None


def open_library(data_dir: Path) -> ModelLibrary:
    """The installed-models registry of ``data_dir`` (its database is created if needed)."""
    return ModelLibrary(open_database(database_path(data_dir)), models_folder(data_dir))


def resolve_model_ref(ref: str, data_dir: Path) -> str:
    """``default`` or a path for the engine to load."""
    if ref == DEFAULT_MODEL or looks_like_path(ref):
        return ref
    try:
        library = open_library(data_dir)
        try:
            return str(library.resolve(ref))
        except StoreError as exc:
            raise ModelRefError(_unknown(ref, library) or str(exc)) from exc
        finally:
            library.db.close()
    except StoreError as exc:
        raise ModelRefError(str(exc)) from exc


def _unknown(ref: str, library: ModelLibrary) -> str | None:
    """What to say of a ref that names nothing Hearth knows: neither installed nor in the catalogue
    (None when it is one of them: the library's own message then says what is wrong, such as
    ``hearth models pull ID`` for a catalogue model not yet downloaded)."""
    model_id, _quant = split_ref(ref)
    installed = library.list()
    known_here = {m.id for m in installed if m.id} | {m.name for m in installed}
    catalogue = _catalogue_ids()
    if ref.strip() in known_here or model_id in known_here or model_id in catalogue:
        return None
    close = difflib.get_close_matches(model_id, sorted(known_here | set(catalogue)), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return (f"'{ref}' is neither a model file nor an installed or catalogue model's id; {hint}"
            "`hearth models list` lists them (or give the path of a .gguf file)")


def _catalogue_ids() -> list[str]:
    """The ids the catalogue offers (none when it cannot be read: the ref is then only looked up as installed)."""
    try:
        return [entry.id for entry in app_catalogue(None)]
    except CatalogueError:
        return []


def model_display_name(ref: str, data_dir: Path) -> str:
    """What ``--model REF`` is called for the user: the embedded model's name, an installed model's
    registered name (a download's is the catalogue's), or else the file's name without ``.gguf``.
    Never the GGUF's own ``general.name``, which is often a training run's label."""
    if ref == DEFAULT_MODEL:
        return EMBEDDED_NAME
    try:
        library = open_library(data_dir)
    except StoreError:
        return Path(ref).stem or ref
    try:
        path = Path(ref).expanduser().resolve() if looks_like_path(ref) else library.resolve(ref).resolve()
        return next((m.name for m in library.list() if m.path.resolve() == path), path.stem)
    except (StoreError, OSError):
        return Path(ref).stem or ref
    finally:
        library.db.close()


CATALOGUE_ENV = "HEARTH_CATALOGUE"  # another catalogue file (tests, or an organisation's own list)


def app_catalogue(cache_dir: Path | None) -> Catalogue:
    """The catalogue Hearth offers: the shipped one (or ``$HEARTH_CATALOGUE``), with the sizes and
    digests that earlier downloads read from the hub laid over it."""
    override = os.environ.get(CATALOGUE_ENV)
    return load_catalogue(Path(override) if override else None, cache_dir=cache_dir)
