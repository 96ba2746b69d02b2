"""Checking a local GGUF file before Hearth registers it as a model ("import").

A file a user points at may be anything: a half-copied download, a vocabulary-only file, a
model for an architecture the bundled llama.cpp cannot run, or garbage. :func:`check_gguf`
refuses all of these with :class:`ImportRefused`, whose message says what is wrong and what to
do, before the file ever reaches the engine (where a bad file could crash the worker).

The checks, cheapest first:

1. the path is an existing, readable, regular file (a link that loops is said to be one);
2. the 24-byte header: magic ``GGUF``, a version the reader supports (2 or 3), and tensor and
   metadata counts that are not absurd (at most :data:`MAX_TENSORS` / :data:`MAX_METADATA`);
3. the metadata and the list of tensors, walked by :func:`model_store.gguf_meta.read_metadata`,
   which checks every length against the file and tells a file cut short from garbage after a
   valid header; every tensor's shape is sane (1-4 dimensions, each in 1..2^31), its type is one
   ggml knows and its data lies inside the file (a download cut short fails here as *truncated*),
   and the file ends where its data does (a valid file followed by a terabyte of holes fails here
   as *damaged*). That walk is the one check of a file's extent, the engine's as well;
4. the metadata and tensor table, parsed by ``gguf.GGUFReader``. The reader memory-maps the
   file, so only the pages it touches (the header, not the weights) are read into memory;
   :class:`_CheckingReader` refuses tensors stored in a type llama.cpp cannot compute with before
   the reader builds its views;
5. ``general.architecture`` is present and in the supported set, there are tensors and one of
   them is the token embedding, and the model's headline numbers (embedding width, context
   length, layer count) are within bounds no real model exceeds.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType

from model_store.db import StoreError
from model_store.eagle3_heads import HEAD_ARCHITECTURE, HEAD_TENSOR
from model_store.gguf_meta import GgufUnreadable, read_metadata
from model_store.regular_file import NotRegularFile, not_regular_reason, open_regular

# gguf arch names (gguf.constants.MODEL_ARCH_NAMES) of models the bundled llama.cpp 0.3.36 runs
# and Hearth is meant for: the hybrid families first, then common small transformers.
SUPPORTED_ARCHITECTURES = frozenset({
    "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe",
    "granitehybrid", "falcon-h1", "mamba2",
    "qwen3", "qwen3moe", "qwen2", "llama", "gemma3", "phi3", "granite", "smollm3",
})

SUPPORTED_VERSIONS = (2, 3)
HEADER_BYTES = 24  # magic, version (u32), tensor count (u64), metadata count (u64)
MAX_TENSORS = 100_000
MAX_METADATA = 100_000
# (metadata key suffix, upper bound): embedding width, trained context, layer count.
LIMITS = (("embedding_length", 1 << 17), ("context_length", 1 << 24), ("block_count", 4096))
TOKEN_EMBEDDING = "token_embd.weight"


class ImportRefused(StoreError):
    """A file cannot be imported as a model.

    Attributes:
        path: The file.
        reason: Why, in words a user can act on.
    """

    def __init__(self, path: Path, reason: str):
        super().__init__(f"cannot import {path}: {reason}")
        self.path = path
        self.reason = reason


class _Refusal(Exception):
    """Raised by the checks below with a reason; :func:`check_gguf` adds the path."""


@dataclass(frozen=True)
class GgufSummary:
    """What an accepted file is."""

    path: Path
    architecture: str
    name: str | None
    size_bytes: int
    n_tensors: int
    context_length: int | None
    parameter_count: int


def check_gguf(path: Path, supported: frozenset[str] | set[str] = SUPPORTED_ARCHITECTURES) -> GgufSummary:
    """Validate a local GGUF model file and describe it.

    Args:
        path: The file.
        supported: GGUF architecture names to accept.

    Returns:
        A summary of the file.

    Raises:
        ImportRefused: With the reason, if the file is not a usable model.
    """
    path = Path(path)
    try:
        size = _check_file(path)
        _check_header(path)
        return _summarize(path, size, supported)
    except _Refusal as refusal:
        raise ImportRefused(path, str(refusal)) from None


def _check_file(path: Path) -> int:
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Refusal("it is a symbolic link that leads back to itself (a loop of links), so there is no "
                           "file to read; choose the .gguf file itself") from None
        raise _Refusal("there is no such file") from None
    if (reason := not_regular_reason(path.stat().st_mode)) is not None:
        raise _Refusal(reason)
    if not os.access(path, os.R_OK):
        raise _Refusal("Hearth may not read it; check the file's permissions")
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise _Refusal(f"it has only {size} bytes, too few for a GGUF model; it may be truncated")
    return size


def not_gguf_reason(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is not a GGUF model, in words; None if it starts as one.
    (The one wording for a file of another kind, for importing and for loading alike.)"""
    if not head:
        return "the file is empty; download or copy it again"
    if head[:4] != b"GGUF":
        return (f"this file is not a GGUF model file: it starts with {_shown_start(head[:4])}, not 'GGUF' "
                "(Hearth runs models in llama.cpp's GGUF format; convert others with llama.cpp's "
                "convert_hf_to_gguf.py)")
    return None


def _shown_start(start: bytes) -> str:
    """A file's first bytes as a user reads them: quoted text if they are printable, else hex."""
    text = start.decode("ascii", errors="replace")
    if text.isprintable() and "\ufffd" not in text:
        return f"'{text}'"
    return "the bytes " + " ".join(f"{b:02x}" for b in start)


def _check_header(path: Path) -> None:
    try:
        with open_regular(path) as f:
            header = f.read(HEADER_BYTES)
    except NotRegularFile as exc:
        raise _Refusal(str(exc)) from None
    if (reason := not_gguf_reason(header)) is not None:
        raise _Refusal(reason)
    order = "<" if struct.unpack("<I", header[4:8])[0] & 0xFFFF else ">"
    version, n_tensors, n_metadata = struct.unpack(order + "IQQ", header[4:])
    if version not in SUPPORTED_VERSIONS:
        raise _Refusal(
            f"it is GGUF version {version}, but Hearth reads versions "
            f"{' and '.join(map(str, SUPPORTED_VERSIONS))}; convert the model with a current llama.cpp"
        )
    if n_tensors == 0:
        raise _Refusal("it contains no tensors (a vocabulary or metadata-only file?), so no model")
    if n_tensors > MAX_TENSORS or n_metadata > MAX_METADATA:
        raise _Refusal(
            f"its header claims {n_tensors} tensors and {n_metadata} metadata entries, more than "
            "any real model has; the file is damaged"
        )


def _summarize(path: Path, size: int, supported) -> GgufSummary:
    try:
        read_metadata(path)
    except GgufUnreadable as exc:
        raise _Refusal(str(exc)) from None
    try:
        reader = _CheckingReader(path)
    except (ValueError, IndexError, KeyError, OverflowError, TypeError, MemoryError):
        # The metadata's lengths were sound, so the tensor table (or a repeated key) is what is
        # broken. The reader's own words (numpy's, mostly) would mean nothing to the user.
        raise _Refusal(
            "it is damaged or truncated: its metadata or its list of tensors cannot be read; an interrupted "
            "download or copy leaves such a file, so get it again"
        ) from None
    arch = _architecture(reader, supported)
    _check_tensors(reader, arch)
    _check_limits(reader, arch)
    return GgufSummary(
        path=path,
        architecture=arch,
        name=_string_field(reader, "general.name"),
        size_bytes=size,
        n_tensors=len(reader.tensors),
        context_length=_int_field(reader, f"{arch}.context_length"),
        parameter_count=sum(int(t.n_elements) for t in reader.tensors),
    )


class _CheckingReader(GGUFReader):
    """``GGUFReader`` that refuses a tensor llama.cpp cannot compute with before mapping it (its shape,
    type and extent were checked by :func:`model_store.gguf_meta.read_metadata`)."""

    def _build_tensors(self, start_offs, fields) -> None:
        for field in fields:
            _name_len, name_data, _n_dims, _dims, raw_dtype, _offset = field.parts
            name = bytes(name_data).decode("utf-8", "replace")
            if int(raw_dtype[0]) in UNCOMPUTABLE_TYPES and not (  # IntEnum members: an int finds them
                    name == DRAFT_VOCABULARY and int(raw_dtype[0]) == GGMLQuantizationType.I64):
                kind = GGMLQuantizationType(int(raw_dtype[0]))
                raise _Refusal(f"tensor '{name}' is stored as {kind.name}, which llama.cpp cannot compute with; "
                               "convert the model again to F32, F16, BF16 or a quantization")
        super()._build_tensors(start_offs, fields)


# Types a GGUF may declare that llama.cpp's CPU kernels cannot multiply: a head with F64 matrices
# loaded, then killed the process at its first decode. An EAGLE-3 head's draft vocabulary
# (DRAFT_VOCABULARY) is the one I64 tensor llama.cpp reads, as indices, not to multiply.
UNCOMPUTABLE_TYPES = frozenset({GGMLQuantizationType.F64, GGMLQuantizationType.I64})
DRAFT_VOCABULARY = "d2t"  # an EAGLE-3 head's target token id of each of its own output rows


def _architecture(reader: GGUFReader, supported) -> str:
    arch = _string_field(reader, "general.architecture")
    if not arch:
        raise _Refusal("it has no general.architecture entry, so it is not a usable model file")
    if arch not in supported:
        raise _Refusal(f"architecture '{arch}' is not supported by this version of Hearth")
    return arch


def _check_tensors(reader: GGUFReader, arch: str) -> None:
    names = {t.name for t in reader.tensors}
    if not names:
        raise _Refusal("it contains no tensors, so no model")
    if DRAFT_VOCABULARY in names and arch != HEAD_ARCHITECTURE:
        raise _Refusal(f"it has a '{DRAFT_VOCABULARY}' tensor, which only an EAGLE-3 head has; the file is damaged")
    if arch == HEAD_ARCHITECTURE:  # a draft head borrows its model's token embedding; it must have its fusion matrix
        if HEAD_TENSOR not in names:
            raise _Refusal(f"it has no '{HEAD_TENSOR}' tensor, so it is not a complete EAGLE-3 head")
        if DRAFT_VOCABULARY in names:
            _check_draft_vocabulary(reader)
        return
    if TOKEN_EMBEDDING not in names:
        raise _Refusal(
            f"it has no '{TOKEN_EMBEDDING}' tensor, so it is not a complete language model "
            "(a LoRA adapter, projector or draft head?)"
        )


def _check_draft_vocabulary(reader: GGUFReader) -> None:
    """A head's ``d2t``: llama.cpp writes each of the head's output rows to the token id it names, with
    no bounds check of its own, so every id must be one of the vocabulary's, and its output matrix must
    have one row per id."""
    tensors = {t.name: t for t in reader.tensors}
    d2t = tensors[DRAFT_VOCABULARY]
    tokens = reader.get_field("tokenizer.ggml.tokens")
    n_vocab = len(tokens.data) if tokens is not None else 0
    ids = np.asarray(d2t.data)
    if d2t.tensor_type != GGMLQuantizationType.I64 or ids.ndim != 1 or not 0 < len(ids) <= n_vocab:
        raise _Refusal(f"its '{DRAFT_VOCABULARY}' tensor is not a list of at most {n_vocab:,} token ids; "
                       "the file is damaged")
    if ids.min() < 0 or ids.max() >= n_vocab:
        raise _Refusal(f"its '{DRAFT_VOCABULARY}' tensor names token ids outside its vocabulary of {n_vocab:,} "
                       "tokens; the file is damaged")
    output = tensors.get("output.weight")
    if output is None or int(output.shape[-1]) != len(ids):
        raise _Refusal(f"its output matrix does not have one row per token of its '{DRAFT_VOCABULARY}' tensor "
                       f"({len(ids):,}); the file is damaged")


def _check_limits(reader: GGUFReader, arch: str) -> None:
    for key, limit in LIMITS:
        value = _int_field(reader, f"{arch}.{key}")
        if value is not None and not 0 < value <= limit:
            raise _Refusal(f"{arch}.{key} is {value}, which no real model has; the file is damaged")


def _field(reader: GGUFReader, key: str):
    field = reader.get_field(key)
    if field is None:
        return None
    try:
        return field.contents()
    except (ValueError, IndexError, UnicodeDecodeError):
        raise _Refusal(f"its metadata entry {key} cannot be read; the file is damaged") from None


def _string_field(reader: GGUFReader, key: str) -> str | None:
    value = _field(reader, key)
    return value if isinstance(value, str) else None


def _int_field(reader: GGUFReader, key: str) -> int | None:
    value = _field(reader, key)
    if isinstance(value, list):  # per-layer arrays: judge the largest entry
        value = max(value, default=None)
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None
