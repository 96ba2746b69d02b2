"""The shape of the model catalogue, and the checks that make a document a valid catalogue.

The catalogue is a JSON document (``model_store/catalogue.json``)::

    {"schema_version": 1, "models": [ENTRY, ...]}

Each entry is a :class:`CatalogueEntry`. Checking happens in two passes, so that every error
names the entry (by index and id) and the field at fault:

1. *Structure*: ``msgspec`` converts each entry into the frozen Structs below. Unknown fields,
   missing fields and wrong types are refused here (``forbid_unknown_fields``).
2. *Meaning*: :func:`check_entry` applies the rules a type cannot express (positive sizes,
   well-formed ids and hashes, file names that stay inside a folder, a recommended quantization
   that exists), then :func:`check_references` checks what links entries (unique ids, drafts
   that exist).

Errors raise :class:`CatalogueError` with a message such as
``catalogue entry 3 (lfm2-1.2b): files[0].size_bytes must be a positive integer``.

State-shape numbers. The fit advice needs how much memory a sequence's state takes. For an
attention layer that is its K and V rows, which grow with every token; for a recurrent layer
(Gated DeltaNet, Mamba-2, LFM2 short convolution) it is a fixed-size convolution window plus a
fixed-size SSM state. :class:`StateShape` records, per model, the counts llama.cpp sizes its
caches from: ``kv_heads`` and ``head_dim`` of the attention layers, and the per-layer element
counts of the recurrent conv state (``n_embd_r``) and SSM state (``n_embd_s``). llama.cpp keeps
K/V in f16 and recurrent state in f32 by default; those are the byte widths used here.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from model_store.db import StoreError

SCHEMA_VERSION = 1
KV_BYTES_PER_ELEMENT = 2  # f16, llama.cpp's default K/V cache type
RECURRENT_BYTES_PER_ELEMENT = 4  # f32, llama.cpp's default recurrent-state type
GOOD_FOR_LENGTH = 100  # a card's "Good for" line: short enough to read at a glance

_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_QUANT = re.compile(r"[A-Za-z0-9_]{1,32}")
_ARCH = re.compile(r"[a-z0-9][a-z0-9_-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class CatalogueError(StoreError):
    """The catalogue (or a reference into it) is not usable; the message says which part."""


class CatalogueFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One quantization of a model: a single GGUF file in the model's repository.

    ``size_estimated`` is true when ``size_bytes`` was not read from the hub but computed
    (parameters x bits per weight, or a rounded size shown by the hub); a downloader must not
    treat an estimated size as a check.
    """

    quant: str
    filename: str
    size_bytes: int
    sha256: str | None = None
    size_estimated: bool = False


class StateShape(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The numbers a sequence's memory follows from (see the module docstring)."""

    attention_layers: int
    kv_heads: int
    head_dim: int
    recurrent_layers: int = 0
    conv_state_elements: int = 0  # per recurrent layer
    ssm_state_elements: int = 0  # per recurrent layer


class SamplingValues(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Sampling a model's makers publish; a field left out (None) is not published. The ranges are the
    protocol's, checked where the values are used (:mod:`app.services.sampling_defaults`)."""

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None  # the penalty's window: -1 the whole answer, 0 off
    dry_multiplier: float | None = None  # the sequence penalty (llama.cpp's DRY): 0 off


class SamplingAdvice(SamplingValues, frozen=True, forbid_unknown_fields=True):
    """A family's published sampling: the values for answers without thinking, ``thinking`` where
    thinking on differs (only the fields that differ), and where they were published (``source``)."""

    thinking: SamplingValues | None = None
    source: str = ""


class CatalogueEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A curated model: where its files are, what it is, and how big its state gets."""

    id: str
    name: str
    repo_id: str
    architecture: str
    context_length: int
    has_mtp: bool
    draft: str | None
    licence: str
    description: str
    recommended_quant: str
    state: StateShape
    files: list[CatalogueFile]
    source: str
    revision: str = "main"
    sampling: SamplingAdvice | None = None  # the family's published sampling (None: none published)
    good_for: str = ""  # what the makers' model card says it is for, in one short line for a person

    def file(self, quant: str | None = None) -> CatalogueFile:
        """Return the variant ``quant`` (case-insensitive), or the recommended one for None.

        Raises:
            CatalogueError: If the model has no such quantization.
        """
        wanted = (quant or self.recommended_quant).upper()
        for variant in self.files:
            if variant.quant.upper() == wanted:
                return variant
        available = ", ".join(f.quant for f in self.files)
        raise CatalogueError(
            f"model '{self.id}' has no quantization '{quant}'; available: {available}"
        )

    def kv_bytes_per_token(self, bytes_per_element: int = KV_BYTES_PER_ELEMENT) -> int:
        """Attention K and V bytes each token of context adds (f16 cache by default)."""
        s = self.state
        return 2 * s.attention_layers * s.kv_heads * s.head_dim * bytes_per_element

    def recurrent_state_bytes(self) -> int:
        """The fixed recurrent state of one sequence (f32), whatever the context length."""
        s = self.state
        per_layer = s.conv_state_elements + s.ssm_state_elements
        return s.recurrent_layers * per_layer * RECURRENT_BYTES_PER_ELEMENT


class CatalogueDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The top level of the file; entries stay raw until each is converted on its own."""

    schema_version: int
    models: list[Any]


def convert_entry(raw: Any, where: str) -> CatalogueEntry:
    """Convert one raw JSON entry, turning msgspec's message into one that names ``where``."""
    try:
        return msgspec.convert(raw, CatalogueEntry)
    except msgspec.ValidationError as exc:
        raise CatalogueError(f"{where}: {_describe(exc)}") from exc


def _describe(exc: msgspec.ValidationError) -> str:
    """``Expected `int`, got `str` - at `$.files[0].size_bytes``` -> ``files[0].size_bytes: ...``."""
    message, _, path = str(exc).partition(" - at `")
    field = path.rstrip("`").removeprefix("$").removeprefix(".")
    message = message[:1].lower() + message[1:]
    return f"{field}: {message}" if field else message


def check_entry(entry: CatalogueEntry, where: str) -> None:
    """Apply the rules types cannot express to one converted entry.

    Raises:
        CatalogueError: Naming ``where`` and the field at fault.
    """
    problems = list(_entry_problems(entry))
    if problems:
        raise CatalogueError(f"{where}: {problems[0]}")


def _entry_problems(entry: CatalogueEntry):
    if not _ID.fullmatch(entry.id):
        yield "id must be 1-64 lowercase letters, digits, '.', '_' or '-' (no ':')"
    for field in ("name", "licence", "description", "source"):
        if not getattr(entry, field).strip():
            yield f"{field} must not be empty"
    if "\n" in entry.description:
        yield "description must be one line"
    if "\n" in entry.good_for or len(entry.good_for) > GOOD_FOR_LENGTH:
        yield f"good_for must be one line of at most {GOOD_FOR_LENGTH} characters"
    if not _REPO_ID.fullmatch(entry.repo_id):
        yield f"repo_id must look like 'owner/name', not {entry.repo_id!r}"
    if not entry.revision or any(c.isspace() for c in entry.revision) or ".." in entry.revision:
        yield f"revision {entry.revision!r} is not a branch, tag or commit name"
    if not _ARCH.fullmatch(entry.architecture):
        yield f"architecture {entry.architecture!r} is not a GGUF architecture name"
    if entry.context_length <= 0:
        yield "context_length must be a positive integer"
    yield from _state_problems(entry.state)
    yield from _files_problems(entry)
    if entry.sampling is not None and not entry.sampling.source.strip():
        yield "sampling.source must say where the sampling was published"


def _state_problems(state: StateShape):
    for field in StateShape.__struct_fields__:
        if getattr(state, field) < 0:
            yield f"state.{field} must not be negative"
    if state.attention_layers + state.recurrent_layers == 0:
        yield "state must have attention_layers or recurrent_layers"
    if state.attention_layers and not (state.kv_heads > 0 and state.head_dim > 0):
        yield "state.kv_heads and state.head_dim must be positive when there are attention layers"
    if state.recurrent_layers and not (state.conv_state_elements or state.ssm_state_elements):
        yield "state of recurrent layers needs conv_state_elements or ssm_state_elements"


def _files_problems(entry: CatalogueEntry):
    if not entry.files:
        yield "files must list at least one quantization"
    seen: set[str] = set()
    for i, f in enumerate(entry.files):
        at = f"files[{i}]"
        if not _QUANT.fullmatch(f.quant):
            yield f"{at}.quant {f.quant!r} must be letters, digits and '_'"
        elif f.quant.upper() in seen:
            yield f"{at}.quant {f.quant!r} is listed twice"
        seen.add(f.quant.upper())
        reason = unsafe_filename_reason(f.filename)
        if reason:
            yield f"{at}.filename {f.filename!r} {reason}"
        if f.size_bytes <= 0:
            yield f"{at}.size_bytes must be a positive integer"
        if f.sha256 is not None and not is_sha256(f.sha256):
            yield f"{at}.sha256 must be 64 lowercase hex digits or null"
    if entry.files and entry.recommended_quant.upper() not in seen:
        yield f"recommended_quant {entry.recommended_quant!r} is not one of the files' quant"


def is_sha256(value) -> bool:
    """Whether ``value`` is a SHA-256 digest written as 64 lowercase hex digits."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def unsafe_filename_reason(name: str) -> str | None:
    """Why ``name`` could not be used as a relative path inside a folder, or None if it can.

    Refused: empty names, absolute paths, drive letters (``C:``), backslashes, ``.`` / ``..``
    or empty segments, control characters, and names that are not ``.gguf`` files.
    """
    if not name:
        return "is empty"
    if name.startswith("/") or ":" in name:
        return "is an absolute path or names a drive"
    if "\\" in name:
        return "contains a backslash"
    if any(ord(c) < 32 for c in name):
        return "contains a control character"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has an empty, '.' or '..' segment"
    if not name.lower().endswith(".gguf"):
        return "is not a .gguf file"
    return None


def check_references(entries: list[CatalogueEntry], where) -> None:
    """Check what links entries: ids are unique and every draft names another entry.

    Args:
        entries: The converted, individually checked entries, in catalogue order.
        where: ``where(index)`` gives the text that names entry ``index`` in a message.

    Raises:
        CatalogueError: For the first broken link.
    """
    first_index: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry.id in first_index:
            raise CatalogueError(
                f"{where(i)}: id '{entry.id}' is already used by entry {first_index[entry.id]}"
            )
        first_index[entry.id] = i
    for i, entry in enumerate(entries):
        if entry.draft is None:
            continue
        if entry.draft == entry.id:
            raise CatalogueError(f"{where(i)}: draft must name another model, not itself")
        if entry.draft not in first_index:
            raise CatalogueError(f"{where(i)}: draft '{entry.draft}' is not in the catalogue")
