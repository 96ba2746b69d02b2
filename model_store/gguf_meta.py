"""Reading a GGUF file's metadata without trusting it.

A GGUF file starts with a 24-byte header (magic ``GGUF``, version, tensor count, entry count) and
then its metadata: entries of a length-prefixed key, a value type and a value (a number, a
length-prefixed string, or a typed, counted array). Every length and count there comes from the
file, so a damaged file can claim a key of 2^60 bytes. :func:`read_metadata` checks each one
against the bytes the file really has, and says in words what is wrong:

* *truncated*: the entries look right but the file ends inside them (a download cut short);
* *damaged*: what follows the header is not GGUF metadata at all (a key longer than GGUF allows,
  a value type GGUF does not have, a string longer than the whole file).

The list of tensors is walked too, and what it declares is checked against the file (the one check of
a file's extent): each tensor's data (the data section starts after the list, at the file's
``general.alignment``; its offset and its bytes, from its shape and type) must lie inside the file, or
the file is *truncated*; and the file must end where its tensors' data does, give or take
:data:`TRAILING_SLACK` bytes. That second rule matters because llama.cpp maps a model file whole and
reads every page of it into memory before it looks at a tensor (``MAP_POPULATE``): a valid head
followed by a terabyte of holes made the worker read for ever, its memory growing by 400 MiB a second.
A file that goes on far past its data is no GGUF a writer makes, so it is refused as damaged.

It never allocates what the file claims (the file is memory-mapped and only walked), so a bad file
costs a walk, not an out-of-memory error or a library's internal message. Every file Hearth opens as a
model or a head is read through it first: the import check (:mod:`model_store.gguf_check`) and the
engine (:mod:`engine.models.model_files`, before llama.cpp sees a main model, a draft model or an EAGLE-3 head).
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path

from gguf.constants import GGML_QUANT_SIZES

from model_store.download_errors import format_bytes
from model_store.regular_file import open_regular

HEADER_BYTES = 24  # magic, version (u32), tensor count (u64), entry count (u64)
MAX_KEY_BYTES = 65535  # the GGUF specification's limit for a key
MAX_ARRAY_DEPTH = 2  # arrays of arrays are allowed; deeper nesting is no file's metadata
KEPT_ARRAY_ITEMS = 4096  # numeric arrays up to this long (per-layer values) are returned; longer are skipped
MAX_DIMS = 4  # a tensor has 1 to 4 dimensions (GGML_MAX_DIMS)
MAX_DIM = 1 << 31  # and no dimension of a real model comes near 2^31
DEFAULT_ALIGNMENT = 32  # where the data section and each tensor's data start, unless general.alignment says
MAX_ALIGNMENT = 1 << 20  # a power of two; writers use 32 (a larger one would put holes before the data)
# Bytes a file may have past its last tensor's data: a writer pads to the alignment, nothing more.
# llama.cpp reads them all into memory (see the module's docstring), so the allowance is small.
TRAILING_SLACK = 1 << 20
# ggml type id -> (values per block, bytes per block); Q2_0 is newer than the gguf package.
TYPE_SIZES = {int(kind): sizes for kind, sizes in GGML_QUANT_SIZES.items()} | {42: (64, 18)}
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

Value = int | float | bool | str | list


class GgufUnreadable(Exception):
    """The metadata cannot be read; the message is the reason, in words, ending with what to do."""


class GgufTruncated(GgufUnreadable):
    """The file ends inside its metadata."""


class GgufDamaged(GgufUnreadable):
    """What follows the header is not GGUF metadata, or the file does not hold what it declares."""


class _End(Exception):
    """A read ran past the end of the file."""


def read_metadata(path: Path) -> dict[str, Value]:
    """Every metadata entry of a GGUF file except long arrays (the vocabulary): numbers, strings, and
    numeric arrays of at most :data:`KEPT_ARRAY_ITEMS` items. The header's magic must be ``GGUF``.
    The list of tensors after the metadata is walked too: each has 1 to :data:`MAX_DIMS` dimensions
    of 1 to :data:`MAX_DIM`, a type ggml knows, and its data inside the file; and the file ends at
    most :data:`TRAILING_SLACK` bytes after the last tensor's data.

    Raises:
        GgufTruncated, GgufDamaged: Saying what is wrong and what to do.
        model_store.regular_file.NotRegularFile: If the path is a FIFO, device, socket or folder.
        OSError: If the file cannot be read at all.
    """
    with open_regular(path) as f:
        size = f.seek(0, 2)
        if size < HEADER_BYTES:
            raise GgufTruncated(_truncated(size, size))
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _Walk(data, size).entries()


def _truncated(at: int, size: int) -> str:
    return (f"it is damaged or truncated: its metadata stops at byte {at} of {size}; an interrupted download "
            "or copy leaves such a file, so get it again")


def _damaged(detail: str) -> str:
    return (f"it has a GGUF header, but what follows is not GGUF metadata ({detail}); the file is damaged "
            "or is not a model, so get it again")


def _bad_tensor(detail: str) -> str:
    return f"its list of tensors is damaged ({detail}); the file is damaged or is not a model, so get it again"


def _alignment(value: Value) -> int:
    """The file's ``general.alignment``: a power of two up to :data:`MAX_ALIGNMENT`, as llama.cpp requires."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_ALIGNMENT or value & (value - 1):
        raise GgufDamaged(_damaged(f"general.alignment is {value!r}, not a power of two up to {MAX_ALIGNMENT}"))
    return value


def _check_extent(tensors: list[tuple[str, int, int]], data_start: int, size: int) -> None:
    """Each tensor's data (from ``data_start`` + its offset, its bytes long) lies inside the file's ``size``
    bytes, and the file ends at most :data:`TRAILING_SLACK` bytes after the last of it."""
    end = data_start
    for name, offset, n_bytes in tensors:
        tensor_end = data_start + offset + n_bytes
        if tensor_end > size:
            raise GgufTruncated(f"it is truncated: tensor '{name}' ends at byte {tensor_end} but the file has only "
                                f"{size} bytes; the download or copy was cut short, so get it again")
        end = max(end, tensor_end)
    if size - end > TRAILING_SLACK:
        raise GgufDamaged(
            f"it is damaged, or is not a GGUF file Hearth can load: its tensors' data ends at byte {end} "
            f"({format_bytes(end)}), but the file goes on for {format_bytes(size - end)} more (a GGUF file ends "
            "where its data does), and loading it would read all of that into memory; get the file again, or "
            "choose another file")


class _Walk:
    def __init__(self, data: mmap.mmap, size: int) -> None:
        self.data, self.size, self.at = data, size, 0
        version = struct.unpack_from("<I", data, 4)[0]
        self.order = "<" if version & 0xFFFF else ">"  # a big-endian file has its version in the high bytes
        self._layouts: dict[str, struct.Struct] = {}

    def entries(self) -> dict[str, Value]:
        _magic, _version, tensors, count = self._take("4sIQQ")  # each entry takes bytes: a huge count ends at EOF
        found: dict[str, Value] = {}
        try:
            for number in range(1, count + 1):
                key = self._key(number)
                kind = self._take("I")[0]
                value = self._value(kind, f"entry {number} ({key})", depth=0)
                if value is not None:
                    found[key] = value
            listed = [self._tensor(number) for number in range(1, tensors + 1)]
        except _End:
            raise GgufTruncated(_truncated(self.at, self.size)) from None
        alignment = _alignment(found.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = -(-self.at // alignment) * alignment if listed else self.at  # llama.cpp pads only before data
        _check_extent(listed, data_start, self.size)
        return found

    def _tensor(self, number: int) -> tuple[str, int, int]:
        """Walk one entry of the list of tensors (name, dimensions, type, offset), checking its shape and
        type: its name, the offset of its data in the data section and the bytes of its data."""
        n = self._take("Q")[0]
        if not 0 < n <= MAX_KEY_BYTES:
            raise GgufDamaged(_bad_tensor(f"tensor {number} has a name of {n} bytes"))
        name = "".join(c if c.isprintable() else "?" for c in self._bytes(n, f"tensor {number}'s name")
                       .decode("utf-8", errors="replace"))[:64]
        n_dims = self._take("I")[0]
        if not 0 < n_dims <= MAX_DIMS:
            raise GgufDamaged(_bad_tensor(f"tensor '{name}' has {n_dims} dimensions; tensors have 1 to {MAX_DIMS}"))
        dims = self._take("Q" * n_dims)
        for dim in dims:
            if not 0 < dim <= MAX_DIM:
                raise GgufDamaged(_bad_tensor(f"tensor '{name}' has an impossible dimension {dim}"))
        kind, offset = self._take("IQ")
        if kind not in TYPE_SIZES:
            raise GgufDamaged(f"tensor '{name}' uses data type {kind}, which this Hearth does not know (a newer "
                              "quantization?); choose another quantization of the model")
        per_block, block_bytes = TYPE_SIZES[kind]
        return name, offset, math.prod(dims) // per_block * block_bytes

    def _take(self, fmt: str) -> tuple:
        layout = self._layout(fmt)
        if self.at + layout.size > self.size:
            raise _End
        values = layout.unpack_from(self.data, self.at)
        self.at += layout.size
        return values

    def _bytes(self, n: int, what: str) -> bytes:
        if n > self.size:
            raise GgufDamaged(_damaged(f"{what} claims {n} bytes, more than the whole file"))
        if self.at + n > self.size:
            raise _End
        raw = self.data[self.at : self.at + n]
        self.at += n
        return raw

    def _skip_strings(self, count: int, what: str) -> None:
        """Walk past ``count`` strings without copying them (a 248k-token vocabulary and its merges are
        half a million strings: reading each would cost a second on every model load)."""
        length, data, size, at = self._layout("Q"), self.data, self.size, self.at
        for _ in range(count):
            if at + 8 > size:
                raise _End
            n = length.unpack_from(data, at)[0]
            if n > size:
                raise GgufDamaged(_damaged(f"{what} claims {n} bytes, more than the whole file"))
            at += 8 + n
        if at > size:
            raise _End
        self.at = at

    def _layout(self, fmt: str) -> struct.Struct:
        layout = self._layouts.get(fmt)
        if layout is None:
            layout = self._layouts[fmt] = struct.Struct(self.order + fmt)
        return layout

    def _key(self, number: int) -> str:
        n = self._take("Q")[0]
        if not 0 < n <= MAX_KEY_BYTES:
            raise GgufDamaged(_damaged(f"entry {number} has a key of {n} bytes; GGUF keys have 1 to {MAX_KEY_BYTES}"))
        raw = self._bytes(n, f"entry {number}'s key")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GgufDamaged(_damaged(f"entry {number}'s key is not text")) from None

    def _value(self, kind: int, what: str, depth: int) -> Value | None:
        if kind in _SCALARS:
            return self._take(_SCALARS[kind])[0]
        if kind == _STRING:
            n = self._take("Q")[0]
            return self._bytes(n, what).decode("utf-8", errors="replace")
        if kind == _ARRAY and depth < MAX_ARRAY_DEPTH:
            return self._array(what, depth)
        raise GgufDamaged(_damaged(f"{what} has value type {kind}, which GGUF does not have"))

    def _array(self, what: str, depth: int) -> list | None:
        item, count = self._take("IQ")
        if item in _SCALARS:
            width = struct.calcsize(_SCALARS[item])
            if count * width > self.size:
                raise GgufDamaged(_damaged(f"{what} claims {count} values, more than the whole file holds"))
            if count > KEPT_ARRAY_ITEMS:
                self._bytes(count * width, what)
                return None
            return list(self._take(_SCALARS[item] * count)) if count else []
        if count > self.size:
            raise GgufDamaged(_damaged(f"{what} claims {count} values, more than the whole file holds"))
        if item == _STRING:  # the vocabulary and its merges: walked, not kept
            self._skip_strings(count, what)
            return None
        values = [self._value(item, what, depth + 1) for _ in range(count)]
        return values if count <= KEPT_ARRAY_ITEMS else None
