"""The curated model catalogue shipped with Hearth, and look-ups into it.

The catalogue is data, not code: ``catalogue.json`` next to this module (package data), read
with :func:`load_catalogue` and validated entry by entry against the schema in
:mod:`model_store.catalogue_schema`. A broken catalogue is refused whole, with a message naming
the entry and field, so a typo never turns into a wrong download.

Each entry says where its facts came from (``source``). Sizes and SHA-256 digests in the
shipped file are what could be verified when the catalogue was written; some sizes are
estimates (``size_estimated``) and some digests are unknown (``null``).

Cached hub metadata. After a download has read a file's real size and digest from the hub, the
downloader calls :func:`save_cached_metadata`; :func:`load_catalogue` then lays those values
over the shipped ones (``cache_dir`` argument), so an offline start still knows the verified
numbers. The overlay is a cache: if it is missing, damaged or written for another revision it
is ignored. This module never touches the network.

References. A model is named by its id (``qwen3.5-0.8b``) or by id and quantization
(``qwen3.5-0.8b:Q8_0``, case-insensitive); :meth:`Catalogue.resolve` turns either into an
entry and one of its files.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import msgspec

from model_store.catalogue_schema import (
    SCHEMA_VERSION,
    CatalogueDocument,
    CatalogueEntry,
    CatalogueError,
    CatalogueFile,
    check_entry,
    check_references,
    convert_entry,
    is_sha256,
)

__all__ = [
    "Catalogue",
    "CatalogueEntry",
    "CatalogueError",
    "CatalogueFile",
    "load_catalogue",
    "parse_catalogue",
    "save_cached_metadata",
    "split_ref",
]

log = logging.getLogger(__name__)

PACKAGED_NAME = "catalogue.json"
CACHE_NAME = "catalogue-metadata.json"
CACHE_VERSION = 1


@dataclass(frozen=True)
class Catalogue:
    """The validated entries, in catalogue order (hybrid models first)."""

    entries: list[CatalogueEntry]
    origin: str = "<catalogue>"

    def __iter__(self) -> Iterator[CatalogueEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, model_id: str) -> CatalogueEntry:
        """Return the entry ``model_id``.

        Raises:
            CatalogueError: If there is none.
        """
        for entry in self.entries:
            if entry.id == model_id:
                return entry
        raise CatalogueError(
            f"no model '{model_id}' in the catalogue; `hearth models list` shows them"
        )

    def resolve(self, ref: str) -> tuple[CatalogueEntry, CatalogueFile]:
        """Turn ``"id"`` or ``"id:QUANT"`` into the entry and the file to use.

        Without a quantization the entry's recommended one is chosen.

        Raises:
            CatalogueError: If the id or the quantization is unknown.
        """
        model_id, quant = split_ref(ref)
        entry = self.get(model_id)
        return entry, entry.file(quant)


def split_ref(ref: str) -> tuple[str, str | None]:
    """Split ``"id:QUANT"`` into ``("id", "QUANT")``; a bare id gives ``("id", None)``."""
    model_id, _, quant = ref.strip().partition(":")
    return model_id, quant or None


def parse_catalogue(data: bytes, origin: str) -> Catalogue:
    """Validate a catalogue document and return its entries.

    Args:
        data: The JSON text.
        origin: Where it came from (a path), used in error messages.

    Raises:
        CatalogueError: If the JSON is malformed or any entry breaks the schema; the message
            names ``origin``, the entry (index and id) and the field.
    """
    try:
        document = msgspec.json.decode(data, type=CatalogueDocument)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CatalogueError(f"{origin}: not a valid catalogue: {exc}") from exc
    if document.schema_version != SCHEMA_VERSION:
        raise CatalogueError(
            f"{origin}: catalogue schema_version {document.schema_version} is not supported "
            f"(this Hearth reads version {SCHEMA_VERSION})"
        )

    def where(index: int) -> str:
        raw = document.models[index]
        model_id = raw.get("id") if isinstance(raw, dict) else None
        named = f" ({model_id})" if isinstance(model_id, str) and model_id else ""
        return f"{origin}: catalogue entry {index}{named}"

    entries = []
    for index, raw in enumerate(document.models):
        entry = convert_entry(raw, where(index))
        check_entry(entry, where(index))
        entries.append(entry)
    check_references(entries, where)
    return Catalogue(entries, origin)


def load_catalogue(path: Path | None = None, *, cache_dir: Path | None = None) -> Catalogue:
    """Read and validate a catalogue file, laying cached hub metadata over it.

    Args:
        path: The catalogue; None reads the one packaged with Hearth.
        cache_dir: Where :func:`save_cached_metadata` keeps verified sizes and digests; None
            uses the file as shipped.

    Raises:
        CatalogueError: If the file cannot be read or is not a valid catalogue.
    """
    if path is None:
        source = resources.files("model_store").joinpath(PACKAGED_NAME)
        origin = f"packaged {PACKAGED_NAME}"
    else:
        source, origin = Path(path), str(path)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise CatalogueError(f"cannot read the catalogue {origin}: {exc}") from exc
    catalogue = parse_catalogue(data, origin)
    if cache_dir is None:
        return catalogue
    return _with_overlay(catalogue, _read_overlay(Path(cache_dir) / CACHE_NAME))


def save_cached_metadata(
    cache_dir: Path,
    entry_id: str,
    files: Iterable[CatalogueFile],
    revision: str | None = None,
) -> None:
    """Remember hub-verified sizes and digests of an entry's files for later offline starts.

    Args:
        cache_dir: A folder Hearth may write to (created if missing).
        entry_id: The catalogue entry the files belong to.
        files: Files whose ``size_bytes`` (and ``sha256``, if known) were read from the hub.
        revision: The revision they were read at; None applies them to whatever revision the
            catalogue names.
    """
    path = Path(cache_dir) / CACHE_NAME
    overlay = _read_overlay(path)
    record = overlay.setdefault(entry_id, {"revision": revision, "files": {}})
    if record.get("revision") != revision:
        record.update(revision=revision, files={})
    for f in files:
        record["files"][f.quant.upper()] = {
            "filename": f.filename, "size_bytes": f.size_bytes, "sha256": f.sha256,
        }
    _write_json_atomically(path, {"version": CACHE_VERSION, "entries": overlay})


def _read_overlay(path: Path) -> dict:
    """The overlay's ``entries``, or ``{}`` if the cache is missing or unusable."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring the catalogue metadata cache %s: %s", path, exc)
        return {}
    if not isinstance(document, dict) or document.get("version") != CACHE_VERSION:
        log.warning("ignoring the catalogue metadata cache %s: unknown layout", path)
        return {}
    entries = document.get("entries")
    if not isinstance(entries, dict):
        log.warning("ignoring the catalogue metadata cache %s: unknown layout", path)
        return {}
    return entries


def _with_overlay(catalogue: Catalogue, overlay: dict) -> Catalogue:
    entries = [_overlay_entry(entry, overlay.get(entry.id)) for entry in catalogue.entries]
    return Catalogue(entries, catalogue.origin)


def _overlay_entry(entry: CatalogueEntry, record) -> CatalogueEntry:
    if not isinstance(record, dict) or record.get("revision") not in (None, entry.revision):
        return entry
    cached = record.get("files")
    if not isinstance(cached, dict):
        return entry
    files = [_overlay_file(f, cached.get(f.quant.upper())) for f in entry.files]
    return msgspec.structs.replace(entry, files=files)


def _overlay_file(f: CatalogueFile, cached) -> CatalogueFile:
    """The file with the cached size and digest, when the cache describes this very file."""
    if not isinstance(cached, dict) or cached.get("filename") != f.filename:
        return f
    size, sha256 = cached.get("size_bytes"), cached.get("sha256")
    if type(size) is not int or size <= 0:
        return f
    if sha256 is not None and not is_sha256(sha256):
        return f
    return msgspec.structs.replace(
        f, size_bytes=size, sha256=sha256 or f.sha256, size_estimated=False
    )


def _write_json_atomically(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(value, out, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
