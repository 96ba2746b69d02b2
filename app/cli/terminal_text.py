"""Text from the database or the disk, made safe to print in a terminal row.

A conversation title, a model's name or a file name can hold any character, and printed as they
are some act on the terminal instead of showing: ESC and the C1 controls start control sequences
(colours, cursor moves, clearing the screen, setting the window title, on some terminals writing
the clipboard), a newline or carriage return forges extra rows, a tab shifts columns, and the
bidi overrides and isolates reorder what follows (a name ending ``\\u202etxt.exe`` shows as
``exe.txt``). :func:`visible` writes each of them as the escape a programmer would type
(``\\x1b``, ``\\n``, ``\\u202e``), so the row shows what is really there. Backslashes are left as
they are, so Windows paths read normally. ``--json`` output keeps the real text: JSON has its own
escaping.
"""

from __future__ import annotations

from typing import Any

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # LRE..RLO, LRI..PDI
_LINE_BREAKS = (0x2028, 0x2029)  # LINE and PARAGRAPH SEPARATOR, new lines to some terminals


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_ESCAPES = {code: _escape(code) for code in (*range(0x20), *range(0x7F, 0xA0), *_BIDI_CONTROLS, *_LINE_BREAKS)}


def visible(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1), bidi control and line separator escaped."""
    return text.translate(_ESCAPES)


def visible_strings(value: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, strings, numbers) with :func:`visible` applied to every
    string value, for commands that print a structure they also give as ``--json``."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {key: visible_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [visible_strings(item) for item in value]
    return value
