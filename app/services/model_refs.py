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
from model_store.gguf_meta import GgufUnreadable, read_metadata
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


def resolve_head_ref(ref: str, data_dir: Path) -> str:
    """A path for the engine to load as an EAGLE-3 head: ``ref`` itself when it looks like a path,
    else the file of the installed head with that id."""
    if looks_like_path(ref):
        return ref
    try:
        library = open_library(data_dir)
        try:
            return str(library.resolve_head(ref))
        finally:
            library.db.close()
    except StoreError as exc:
        raise ModelRefError(str(exc)) from exc


def _unknown(ref: str, library: ModelLibrary) -> str | None:
    """What to say of a ref that names nothing Hearth knows: neither installed nor in the catalogue
    (None when it is one of them: the library's own message then says what is wrong, such as
    ``hearth models pull ID`` for a catalogue model not yet downloaded)."""
    model_id, _quant = split_ref(ref)
    installed = library.list() + library.heads()  # a head's id gets the library's own words: it is no model
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


def model_display_name(ref: str, data_dir: Path, general_name: str = "") -> str:
    """What a model is called wherever the user reads its name: the CLI, the window, ``hearth info``
    and (through ``LoadModel.name``) what the worker says. In order:

    1. the catalogue's name: the embedded model's, a download's as registered ("Qwen3.5 0.8B Q8_0"),
       or that of a catalogue file found at another path;
    2. else the name the file gives itself (its ``general.name``: ``general_name`` when the caller has
       it, else read from the file; for an import, the name it was registered under), tidied
       (:func:`tidy_name`): often a training run's label, still more than a file name says;
    3. else the file's name without ``.gguf``.
    """
    if ref == DEFAULT_MODEL:
        return EMBEDDED_NAME
    registered, path = _registered(ref, data_dir)
    if registered is not None and registered.source == "download":
        return registered.name
    named = _catalogue_name(path.name) if path is not None else None
    if named:
        return named
    given = registered.name if registered is not None and registered.source == "import" else \
        general_name or _general_name(path)
    return tidy_name(given) or (path.stem if path is not None else "") or tidy_name(ref) or ref


def tidy_name(name: str) -> str:
    """A name a file gives itself, fit to show: no control characters, one space between words, at
    most :data:`NAME_CHARS` characters."""
    words = "".join(c if c.isprintable() else " " for c in name).split()
    text = " ".join(words)
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 1].rstrip() + "…"


NAME_CHARS = 64


def _registered(ref: str, data_dir: Path):
    """(the installed model ``ref`` names, or None; its file, or None when ``ref`` names none)."""
    path = Path(ref).expanduser() if looks_like_path(ref) else None
    try:
        library = open_library(data_dir)
    except StoreError:
        return None, path
    try:
        path = (path or library.resolve(ref)).resolve()
        return next((m for m in library.registered() if m.path.resolve() == path), None), path
    except (StoreError, OSError, RuntimeError):  # RuntimeError: a loop of links (Python 3.11's resolve)
        return None, path
    finally:
        library.db.close()


def _general_name(path: Path | None) -> str:
    """The ``general.name`` a GGUF file gives itself ("" when it has none or cannot be read)."""
    try:
        name = read_metadata(path).get("general.name", "") if path is not None else ""
    except (GgufUnreadable, OSError):
        return ""
    return name if isinstance(name, str) else ""


def _catalogue_name(filename: str) -> str | None:
    """"Qwen3.5 0.8B Q8_0" for a file named as one of the catalogue's, else None."""
    try:
        catalogue = app_catalogue(None)
    except CatalogueError:
        return None
    return next((f"{entry.name} {file.quant}" for entry in catalogue for file in entry.files
                 if file.filename == filename), None)


CATALOGUE_ENV = "HEARTH_CATALOGUE"  # another catalogue file (tests, or an organisation's own list)


def app_catalogue(cache_dir: Path | None) -> Catalogue:
    """The catalogue Hearth offers: the shipped one (or ``$HEARTH_CATALOGUE``), with the sizes and
    digests that earlier downloads read from the hub laid over it."""
    override = os.environ.get(CATALOGUE_ENV)
    return load_catalogue(Path(override) if override else None, cache_dir=cache_dir)
