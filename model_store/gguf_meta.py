"""Reading a GGUF file's metadata without trusting it.

A GGUF file starts with a 24-byte header (magic ``GGUF``, version, tensor count, entry count) and
then its metadata: entries of a length-prefixed key, a value type and a value (a number, a
length-prefixed string, or a typed, counted array). Every length and count there comes from the
file, so a damaged file can claim a key of 2^60 bytes. :func:`read_metadata` checks each one
against the bytes the file really has, and says in words what is wrong:

* *truncated*: the entries look right but the file ends inside them (a download cut short);
* *damaged*: what follows the header is not GGUF metadata at all (a key longer than GGUF allows,
  a value type GGUF does not have, a string longer than the whole file).

It never allocates what the file claims (the file is memory-mapped and only walked), so a bad file
costs a walk, not an out-of-memory error or a library's internal message. The import check
(:mod:`model_store.gguf_check`) and the engine (:mod:`engine.model_files`, before llama.cpp sees a
file) both read metadata through it.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from model_store.regular_file import open_regular

HEADER_BYTES = 24  # magic, version (u32), tensor count (u64), entry count (u64)
MAX_KEY_BYTES = 65535  # the GGUF specification's limit for a key
MAX_ARRAY_DEPTH = 2  # arrays of arrays are allowed; deeper nesting is no file's metadata
KEPT_ARRAY_ITEMS = 4096  # numeric arrays up to this long (per-layer values) are returned; longer are skipped
MAX_DIMS = 4  # a tensor has 1 to 4 dimensions (GGML_MAX_DIMS)
MAX_DIM = 1 << 31  # and no dimension of a real model comes near 2^31
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

Value = int | float | bool | str | list


class GgufUnreadable(Exception):
    """The metadata cannot be read; the message is the reason, in words, ending with what to do."""


class GgufTruncated(GgufUnreadable):
    """The file ends inside its metadata."""


class GgufDamaged(GgufUnreadable):
    """What follows the header is not GGUF metadata."""


class _End(Exception):
    """A read ran past the end of the file."""


def read_metadata(path: Path) -> dict[str, Value]:
    """Every metadata entry of a GGUF file except long arrays (the vocabulary): numbers, strings, and
    numeric arrays of at most :data:`KEPT_ARRAY_ITEMS` items. The header's magic must be ``GGUF``.
    The list of tensors after the metadata is walked too: each has 1 to :data:`MAX_DIMS` dimensions
    of 1 to :data:`MAX_DIM`.

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
            for number in range(1, tensors + 1):
                self._tensor(number)
        except _End:
            raise GgufTruncated(_truncated(self.at, self.size)) from None
        return found

    def _tensor(self, number: int) -> None:
        """Walk one entry of the list of tensors (name, dimensions, type, offset), checking its shape."""
        n = self._take("Q")[0]
        if not 0 < n <= MAX_KEY_BYTES:
            raise GgufDamaged(_bad_tensor(f"tensor {number} has a name of {n} bytes"))
        name = "".join(c if c.isprintable() else "?" for c in self._bytes(n, f"tensor {number}'s name")
                       .decode("utf-8", errors="replace"))[:64]
        n_dims = self._take("I")[0]
        if not 0 < n_dims <= MAX_DIMS:
            raise GgufDamaged(_bad_tensor(f"tensor '{name}' has {n_dims} dimensions; tensors have 1 to {MAX_DIMS}"))
        for dim in self._take("Q" * n_dims):
            if not 0 < dim <= MAX_DIM:
                raise GgufDamaged(_bad_tensor(f"tensor '{name}' has an impossible dimension {dim}"))
        self._take("IQ")  # its type and offset: llama.cpp checks them against the data

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
