"""How much an operation in a chat template would build, worked out before it runs.

Each estimate is an upper bound in the units of :mod:`engine.templates.template_budget` (characters; list
items at :data:`~engine.templates.template_budget.ITEM_UNITS`) computed from the operands alone, cheaply: a
``count`` of the pattern, the lengths involved, a walk of a container that stops once it passes
the budget. :data:`ESTIMATES` maps a filter or ``str`` method name to its estimate; an operation
not named there is counted by what it returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2.runtime import Undefined
from jinja2.utils import Namespace

from engine.templates.template_budget import ITEM_UNITS, TemplateBudgetError, allowance_left

_NUMBERS = re.compile(r"\d+")
WORDS = ITEM_UNITS // 2  # a filter that splits text into words holds up to an item per two characters
_SHORT = 64  # what an object's str() takes when it is not text, a number or a container (a loop, a macro)


def rendered_size(value: Any, cap: int | None = None) -> int:
    """Characters ``str(value)`` has (an upper bound); counting stops soon after ``cap`` (by default
    what the render may still build)."""
    if isinstance(value, str):
        return str.__len__(value)  # a marked message counts its markers too
    try:
        return _Walk(allowance_left() if cap is None else cap).size(value, quoted=False)
    except RecursionError:
        raise TemplateBudgetError("it built a value nested too deep to print") from None


class _Walk:
    """One walk of a value; a container reached twice is counted from memory, one being printed is
    ``[...]`` (as ``repr`` prints a cycle)."""

    def __init__(self, cap: int) -> None:
        self.cap, self.memo = cap, {}

    def size(self, value: Any, quoted: bool) -> int:
        if isinstance(value, str):
            if not quoted:
                return str.__len__(value)
            if str.__len__(value) < 256:
                return _quoted_size(value)
            if id(value) not in self.memo:  # the same long string in many places is scanned once
                self.memo[id(value)] = _quoted_size(value)
            return self.memo[id(value)]
        if isinstance(value, bool) or value is None:
            return 5
        if isinstance(value, int):
            return value.bit_length() * 3 // 10 + 2
        if isinstance(value, float):
            return 24
        if isinstance(value, Undefined):
            return 0
        if isinstance(value, Namespace):
            return 14 + self._container(value._Namespace__attrs)
        if isinstance(value, (list, tuple, set, frozenset, dict)) or type(value).__name__.startswith("dict_"):
            return self._container(value)
        return _SHORT

    def _container(self, value: Any) -> int:
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = 5  # while it is printed, a reference back to it prints as [...]
        size = 16
        for item in (value.items() if isinstance(value, Mapping) else value):
            size += self.size(item, quoted=True) + 2
            if size > self.cap:
                break
        self.memo[key] = size
        return size


def _quoted_size(text: str) -> int:
    """Characters of ``repr(text)``: escapes make an unprintable character up to ten."""
    n = str.__len__(text)
    if text.isprintable():
        return n + 2 + text.count("\\") + text.count("'")
    return 10 * n + 2


def units(value: Any) -> int:
    """What a value just built costs: its characters, or its items (and its items' items)."""
    if isinstance(value, str):
        return str.__len__(value)
    if isinstance(value, (list, tuple, dict)):
        nested = sum(len(item) for item in value if isinstance(item, (list, tuple, dict)))
        return ITEM_UNITS * (len(value) + nested)
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 8
    return 0


def items_size(value: Any) -> int:
    """The cost of a list holding ``value``'s items (its characters, for a string)."""
    try:
        return ITEM_UNITS * len(value)
    except TypeError:
        return 0  # a generator: counted as it is consumed


# -- estimates by operation --------------------------------------------------------------------------

def _text(value: Any) -> int:
    return rendered_size(value)


def format_size(fmt: Any, values: Any) -> int:
    """``fmt % values`` or ``fmt.format(*values)``: every field may print the largest value, padded
    to any width the format names."""
    fmt_text = fmt if isinstance(fmt, str) else str(fmt)
    if isinstance(values, Mapping):
        sizes = [rendered_size(v) for v in values.values()]
    elif isinstance(values, (tuple, list)):
        sizes = [rendered_size(v) for v in values]
    else:
        sizes = [rendered_size(values)]
    fields = fmt_text.count("%") + fmt_text.count("{")
    widths = sum(int(n) if len(n) < 13 else 10 ** 12 for n in _NUMBERS.findall(fmt_text))
    given = (values.values() if isinstance(values, Mapping) else values if isinstance(values, (tuple, list))
             else (values,))
    # a number among the values may be a width too ('%*s', '{:{}}')
    width_args = max((abs(v) for v in given if isinstance(v, int) and not isinstance(v, bool)), default=0)
    return str.__len__(fmt_text) + fields * (max(sizes, default=0) + width_args) + widths


def _join(value: Any, d: Any = "", attribute: Any = None) -> int:
    """(``value`` is a sequence: the sandbox turns a generator into a list first.)"""
    if not value:
        return 0
    return sum(rendered_size(item) for item in value) + rendered_size(d) * (len(value) - 1)


def _replace(s: Any, old: Any, new: Any, count: Any = None) -> int:
    text, old, new = (v if isinstance(v, str) else str(v) for v in (s, old, new))
    n = str.count(text, old) if old else str.__len__(text) + 1
    if isinstance(count, int) and count >= 0:
        n = min(n, count)
    return str.__len__(text) + n * max(str.__len__(new) - str.__len__(old), 0)


def _indent(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> int:
    text = s if isinstance(s, str) else str(s)
    pad = width if isinstance(width, int) else rendered_size(width)
    return str.__len__(text) + (str.count(text, "\n") + 1) * max(pad, 0)


def _padded(s: Any, width: Any = 80, *rest: Any) -> int:
    return _text(s) + (width if isinstance(width, int) else 0)


def _wordwrap(s: Any, width: int = 79, break_long_words: bool = True, wrapstring: Any = None, *rest: Any) -> int:
    size = _text(s)
    return (1 + WORDS) * size + (size + 1) * (rendered_size(wrapstring) if wrapstring is not None else 1)


def _expandtabs(s: Any, tabsize: Any = 8) -> int:
    return _text(s) + str.count(s, "\t") * (tabsize if isinstance(tabsize, int) else 8)


def _split(s: Any, sep: Any = None, maxsplit: Any = -1) -> int:
    parts = str.count(s, sep) if isinstance(sep, str) and sep else str.__len__(s) // 2
    return _text(s) + ITEM_UNITS * (parts + 1)


def _translate(s: Any, table: Any = None) -> int:
    longest = max((rendered_size(v) for v in table.values()), default=1) if isinstance(table, Mapping) else 1
    return _text(s) * max(longest, 1)


def _growing(factor: int) -> Callable[..., int]:
    """A filter whose output is at most ``factor`` times its input (case changes, escaping)."""
    return lambda value, *args, **kwargs: factor * _text(value) + sum(
        rendered_size(a) for a in (*args, *kwargs.values()) if isinstance(a, str)) * (_text(value) + 1)


def _tojson(value: Any, indent: Any = None, *rest: Any) -> int:
    return 6 * _text(value) * (1 + (indent if isinstance(indent, int) and indent > 0 else 0))


def _list(value: Any, *rest: Any) -> int:
    return items_size(value)


def _keyed(value: Any, *args: Any, case_sensitive: bool = False, **kwargs: Any) -> int:
    """``sort``, ``unique``, ``groupby``, ``dictsort``: a list of the items, and (unless case matters)
    a lower-cased copy of each as its key, all held at once while sorting."""
    if not isinstance(value, (list, tuple, dict)):
        return items_size(value)
    keys = 0 if case_sensitive else sum(rendered_size(item) for item in (value.items() if isinstance(value, dict)
                                                                         else value))
    return 2 * items_size(value) + keys


def _batch(value: Any, linecount: Any = 1, fill_with: Any = None) -> int:
    return items_size(value) + (ITEM_UNITS * linecount if fill_with is not None and isinstance(linecount, int) else 0)


ESTIMATES: dict[str, Callable[..., int]] = {
    "join": _join, "replace": _replace, "indent": _indent, "wordwrap": _wordwrap,
    "center": _padded, "ljust": _padded, "rjust": _padded, "zfill": _padded, "expandtabs": _expandtabs,
    "format": lambda fmt, *args, **kwargs: format_size(fmt, kwargs or args),
    "split": _split, "rsplit": _split, "splitlines": lambda s, *rest: _split(s, "\n"),
    "string": _growing(1), "truncate": _growing(1), "trim": _growing(1),
    # these split the text into a list of words (an item per word) on the way
    "striptags": _growing(WORDS), "wordcount": _growing(WORDS), "title": _growing(3 + WORDS),
    "upper": _growing(3), "lower": _growing(3), "capitalize": _growing(3),
    "swapcase": _growing(3), "casefold": _growing(3), "encode": _growing(4), "translate": _translate,
    "escape": _growing(6), "e": _growing(6), "forceescape": _growing(6), "xmlattr": _growing(6),
    "urlencode": _growing(12), "urlize": _growing(12 + WORDS), "pprint": _growing(4), "tojson": _tojson,
    "list": _list, "reverse": _list, "items": _list, "batch": _batch, "slice": _batch,
    "sort": _keyed, "unique": _keyed, "groupby": _keyed, "dictsort": _keyed,
}
# str methods: the string is the first operand; the rest as for the filter of the same name.
METHOD_ESTIMATES: dict[str, Callable[..., int]] = {
    **ESTIMATES, "join": lambda sep, items: _join(items, sep),
}
# Filters neither estimated nor counted: they build nothing new (a number, a truth value, one of the
# items), or lazily (a generator, counted where its items are used), or count themselves (sum).
NOT_COUNTED = frozenset({
    "length", "count", "first", "last", "random", "min", "max", "int", "float", "abs", "round", "bool",
    "default", "d", "attr", "filesizeformat", "select", "reject", "selectattr", "rejectattr",
    "map", "safe", "mark_safe", "sum",
})


# -- comparisons: what Python compares in C, where no deadline reaches -------------------------------

def compared_chars(operator: str, left: Any, right: Any) -> int:
    """Characters ``left operator right`` may compare: a search of a list compares the needle with
    every item, two lists are compared item by item."""
    if operator in ("in", "notin"):
        if isinstance(right, (list, tuple)):
            return len(right) * rendered_size(left, 1 << 40)
        return 0
    if isinstance(left, (list, tuple, dict)) and isinstance(right, (list, tuple, dict)):
        return min(rendered_size(left, 1 << 40), rendered_size(right, 1 << 40))
    return 0


def sorted_chars(value: Any) -> int:
    """Characters sorting ``value`` may compare: n log n comparisons, each of up to the longest item."""
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        return 0
    longest = max(rendered_size(item, 1 << 40) for item in value)
    return len(value) * len(value).bit_length() * longest
