"""How deep a request's JSON may nest, checked before any decoder reads it.

msgspec and the ``json`` module decode nested arrays and objects by recursion: a body nested
200,000 deep, in any field, raised ``RecursionError`` and was answered 500. No request of this API
nests deeper than a few levels (a message's text part is ``messages[0].content[0].text``: five), so
a body that nests more than :data:`MAX_DEPTH` arrays and objects is refused, 400 naming the field
where it does.

An ordinary body has fewer brackets than :data:`MAX_DEPTH` in all (``bytes.count``) and is not
looked at further. Another is measured with numpy, never a Python loop over its bytes (about 50 ms
for 4 MiB): which bytes are inside strings (between quotes that no backslash escapes), and the depth
after each byte, counting only the brackets outside strings. A refused body is named from the same
arrays: where each enclosing array or object opens, and the key or index it opens at. Only what
comes before the first syntax error matters: a decoder stops there.
"""

from __future__ import annotations

import numpy as np

MAX_DEPTH = 64
NAMED_LEVELS = 5  # how far down the field is named (messages[0].content[0].text)
KEY_CHARS = 40  # of each key in the name (a request's keys are a client's text)

_STEPS = np.zeros(256, dtype=np.int32)
_STEPS[[ord("["), ord("{")]] = 1
_STEPS[[ord("]"), ord("}")]] = -1
QUOTE, BACKSLASH, COMMA, COLON = (ord(c) for c in '"\\,:')


class NestedTooDeep(Exception):
    """The body nests deeper than :data:`MAX_DEPTH`; ``field`` names where (None: the body itself)."""

    def __init__(self, field: str | None) -> None:
        where = f"Invalid '{field}': it nests" if field else "The request body nests"
        super().__init__(f"{where} arrays or objects more than {MAX_DEPTH} levels deep, and no field of this API "
                         "takes that; send the value the field takes")
        self.field = field


def check_depth(data: bytes) -> None:
    """Raise :class:`NestedTooDeep` if ``data`` nests more than :data:`MAX_DEPTH` levels."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return
    body = Structure(data)
    if body.depths.size and body.depths.max() > MAX_DEPTH:
        raise NestedTooDeep(body.deep_field())


class Structure:
    """A body's bytes, which of them are inside strings, its quotes, and its depth after each byte."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.chars = np.frombuffer(data, dtype=np.uint8)
        quotes = self.chars == QUOTE
        if b'\\"' in data:  # a quote after an odd run of backslashes is part of its string
            quotes &= _backslashes_before(self.chars == BACKSLASH) % 2 == 0
        self.quotes = np.flatnonzero(quotes)
        self.inside = np.cumsum(quotes, dtype=np.int32) % 2 == 1  # (an opening quote is inside, a closing one not)
        self.depths = np.cumsum(_STEPS[self.chars] * ~self.inside, dtype=np.int32)

    def deep_field(self) -> str | None:
        """The field whose value nests past :data:`MAX_DEPTH` (its first :data:`NAMED_LEVELS` levels,
        as ``a.b[0].c``); None if it is the body itself."""
        past = int(np.argmax(self.depths > MAX_DEPTH))
        depths = self.depths[:past]
        path: list[str | int | None] = []
        opened = _opening(depths, 1)
        for level in range(2, NAMED_LEVELS + 2):
            inner = _opening(depths, level)  # the level-deep array or object on the way down
            if self.chars[opened] == ord("["):
                within = slice(opened, inner)
                commas = (self.chars[within] == COMMA) & ~self.inside[within] & (depths[within] == level - 1)
                path.append(int(np.count_nonzero(commas)))
            else:
                path.append(self._key_before(inner))
            opened = inner
        return _name(path)

    def _key_before(self, position: int) -> str | None:
        """The key of the member whose value opens at ``position`` (the string before its colon)."""
        colons = np.flatnonzero((self.chars[:position] == COLON) & ~self.inside[:position])
        if not colons.size:
            return None
        closing = int(np.searchsorted(self.quotes, colons[-1]))  # the quotes before the colon
        if closing < 2:
            return None
        start, end = int(self.quotes[closing - 2]) + 1, int(self.quotes[closing - 1])
        return self.data[start:min(end, start + 4 * KEY_CHARS)].decode("utf-8", "replace")[:KEY_CHARS]


def _backslashes_before(backslash: np.ndarray) -> np.ndarray:
    """How many backslashes come right before each byte."""
    index = np.arange(backslash.size, dtype=np.int32)
    last_other = np.maximum.accumulate(np.where(backslash, -1, index))  # the last byte up to here that is not one
    before = np.zeros(backslash.size, dtype=np.int32)
    before[1:] = index[1:] - 1 - last_other[:-1]
    return before


def _opening(depths: np.ndarray, level: int) -> int:
    """Where the array or object ``level`` deep that holds the end of ``depths`` opens."""
    shallower = np.flatnonzero(depths == level - 1)
    return int(shallower[-1]) + 1 if shallower.size else 0


def _name(path: list[str | int | None]) -> str | None:
    """``["messages", 0, "content"]`` as ``messages[0].content``: down to its last key (indices after
    it name no field)."""
    while path and not isinstance(path[-1], str):
        path = path[:-1]
    name = ""
    for part in path:
        if isinstance(part, int):
            name += f"[{part}]"
        elif part is not None:
            name += ("." if name else "") + part
    return name or None
