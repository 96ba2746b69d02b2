"""Knowing which characters of a rendered prompt came from the messages.

The chat template's own text may produce control tokens (``<|im_start|>``); the messages' text
never may: a message or a loaded document containing ``<|im_start|>system`` must reach the model
as those characters, not as a forged turn. So each message's content enters the template wrapped
in two Unicode noncharacters (U+FDD0 … U+FDD1, reserved for a program's internal use), which the
template copies along with the text. After rendering, :func:`take_spans` removes the markers and
returns their positions as *content spans*: text the tokenizer reads as plain text.

Templates do more than paste content: they strip it, split a reasoning part off it, test what it
starts with. :class:`MarkedText` is a ``str`` whose usual methods act on the text inside the
markers and wrap their results again, so such templates render exactly what they would render
without markers. Where a template cuts a pair of markers apart anyway, the span is widened to
everything the cut content could cover: the template's own structure may then be read as plain
text, but the messages' text never becomes control tokens.
"""

from __future__ import annotations

import re
from typing import Any

OPEN = "\ufdd0"
CLOSE = "\ufdd1"
REPLACEMENT = "\ufffd"  # what a marker character inside a message becomes

Span = tuple[int, int]  # [start, end) in the rendered text


def _plain(value: Any) -> Any:
    return value._text if isinstance(value, MarkedText) else value


class MarkedText(str):
    """A message's text between markers; string methods work on the text and keep results marked."""

    def __new__(cls, text: str) -> MarkedText:
        if isinstance(text, MarkedText):
            return text
        if not text:  # nothing to mark: a template that prints it through a macro must see ""
            return ""  # type: ignore[return-value]
        clean = str.replace(str.replace(str(text), OPEN, REPLACEMENT), CLOSE, REPLACEMENT)
        marked = super().__new__(cls, OPEN + clean + CLOSE)
        marked._text = clean
        return marked

    # -- questions about the text answer for the text, not the markers ---------------------------
    def __len__(self) -> int:
        return len(self._text)

    def __contains__(self, part: object) -> bool:
        return _plain(part) in self._text

    def __eq__(self, other: object) -> bool:
        return self._text == _plain(other)

    def __ne__(self, other: object) -> bool:
        return self._text != _plain(other)

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        """What ``str()`` of a list or a dict holding it writes (templates print tools that way): the
        text's repr, marked."""
        return OPEN + repr(self._text) + CLOSE

    def startswith(self, prefix: Any, *args: Any) -> bool:
        return self._text.startswith(_plain(prefix), *args)

    def endswith(self, suffix: Any, *args: Any) -> bool:
        return self._text.endswith(_plain(suffix), *args)

    def find(self, part: Any, *args: Any) -> int:
        return self._text.find(_plain(part), *args)

    def rfind(self, part: Any, *args: Any) -> int:
        return self._text.rfind(_plain(part), *args)

    def index(self, part: Any, *args: Any) -> int:
        return self._text.index(_plain(part), *args)

    def rindex(self, part: Any, *args: Any) -> int:
        return self._text.rindex(_plain(part), *args)

    def count(self, part: Any, *args: Any) -> int:
        return self._text.count(_plain(part), *args)

    # -- operations that make new text keep it marked --------------------------------------------
    def __getitem__(self, key: Any) -> MarkedText:
        return MarkedText(self._text[key])

    def __iter__(self):
        return (MarkedText(char) for char in self._text)

    def strip(self, chars: Any = None) -> MarkedText:
        return MarkedText(self._text.strip(_plain(chars)))

    def lstrip(self, chars: Any = None) -> MarkedText:
        return MarkedText(self._text.lstrip(_plain(chars)))

    def rstrip(self, chars: Any = None) -> MarkedText:
        return MarkedText(self._text.rstrip(_plain(chars)))

    def split(self, sep: Any = None, maxsplit: int = -1) -> list[MarkedText]:
        return [MarkedText(part) for part in self._text.split(_plain(sep), maxsplit)]

    def rsplit(self, sep: Any = None, maxsplit: int = -1) -> list[MarkedText]:
        return [MarkedText(part) for part in self._text.rsplit(_plain(sep), maxsplit)]

    def splitlines(self, keepends: bool = False) -> list[MarkedText]:
        return [MarkedText(line) for line in self._text.splitlines(keepends)]

    def partition(self, sep: Any) -> tuple[MarkedText, MarkedText, MarkedText]:
        before, found, after = self._text.partition(_plain(sep))
        return MarkedText(before), MarkedText(found), MarkedText(after)

    def rpartition(self, sep: Any) -> tuple[MarkedText, MarkedText, MarkedText]:
        before, found, after = self._text.rpartition(_plain(sep))
        return MarkedText(before), MarkedText(found), MarkedText(after)

    def replace(self, old: Any, new: Any, count: int = -1) -> MarkedText:
        return MarkedText(self._text.replace(_plain(old), _plain(new), count))

    def upper(self) -> MarkedText:
        return MarkedText(self._text.upper())

    def lower(self) -> MarkedText:
        return MarkedText(self._text.lower())

    def title(self) -> MarkedText:
        return MarkedText(self._text.title())

    def capitalize(self) -> MarkedText:
        return MarkedText(self._text.capitalize())


def remark(value: Any) -> Any:
    """A filter's result on a message's text, marked again (strings, and lists of strings)."""
    if isinstance(value, str):
        return MarkedText(value)
    if isinstance(value, list):
        return [MarkedText(item) if isinstance(item, str) else item for item in value]
    return value


def take_spans(rendered: str) -> tuple[str, tuple[Span, ...]]:
    """The rendered text without markers, and where the messages' text is in it.

    A close marker whose open marker the template cut off widens the span back to the end of the
    previous span (or the start); an open marker never closed runs to the end of the text.
    """
    text: list[str] = []
    spans: list[Span] = []
    length = 0
    opened_at: int | None = None
    depth = 0
    for piece in _split_markers(rendered):
        if piece == OPEN:
            if depth == 0:
                opened_at = length
            depth += 1
        elif piece == CLOSE:
            if depth == 0:  # its opening was cut off: everything since the last span may be content
                start = spans[-1][1] if spans else 0
                spans = _merge(spans, (start, length))
            else:
                depth -= 1
                if depth == 0 and opened_at is not None:
                    spans = _merge(spans, (opened_at, length))
                    opened_at = None
        else:
            text.append(piece)
            length += len(piece)
    if depth > 0 and opened_at is not None:
        spans = _merge(spans, (opened_at, length))
    return "".join(text), tuple(spans)


_MARKERS = re.compile(f"([{OPEN}{CLOSE}])")


def _split_markers(rendered: str) -> list[str]:
    return [piece for piece in _MARKERS.split(rendered) if piece]


def _merge(spans: list[Span], span: Span) -> list[Span]:
    """Add ``span`` (which starts at or after every earlier span's start), joining touching spans."""
    start, end = span
    if end <= start:
        return spans
    while spans and spans[-1][1] >= start:
        start = min(start, spans[-1][0])
        end = max(end, spans[-1][1])
        spans = spans[:-1]
    return [*spans, (start, end)]
