"""Text Hearth did not write (from the database, the disk, a model or a remote engine), made safe to
print on a terminal.

A conversation title, a model's name or a file name can hold any character, and printed as they
are some act on the terminal instead of showing: ESC and the C1 controls start control sequences
(colours, cursor moves, clearing the screen, setting the window title, on some terminals writing
the clipboard), a newline or carriage return forges extra rows, a tab shifts columns, and the
bidi overrides and isolates reorder what follows (a name ending ``\\u202etxt.exe`` shows as
``exe.txt``). :func:`visible` writes each of them as the escape a programmer would type
(``\\x1b``, ``\\n``, ``\\u202e``), so the row shows what is really there. Backslashes are left as
they are, so Windows paths read normally.

Every line the command line prints that holds text Hearth did not write (names, paths, ids, an
engine's address or words, an error's text) goes through :func:`visible` (error lines in
:func:`app.surfaces.cli.main._report`); ``--json`` output through :func:`json_text`, which writes the same
characters as JSON escapes (``\\u001b``, ``\\u202e``), so a script reads the real text and a
terminal shows the escape. A warning a module logs (a path it could not make private, say) goes
through :class:`VisibleLog`, installed by :func:`show_log_lines_visibly` as the handler Python's
logging falls back on (``logging.lastResort``), so it keeps its lines but not their controls.

An answer, streamed in pieces, goes through :class:`AnswerText`: on a terminal each control
character becomes visible, but for newline and tab (an answer has lines), and a CR LF is a
newline; piped, it passes byte for byte, since a script reading the answer wants the model's text.
A control sequence cannot slip through between two pieces: it acts only when it starts with ESC or
a C1 control (CSI U+009B, OSC U+009D, ...), single characters that are caught wherever they fall,
and what follows them is plain text once they are shown. Only a CR is held back, at the end of a
piece, to see whether a LF follows.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from app.engine_clients.remote.spec import BIDI_CONTROLS

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_BIDI_CONTROLS = tuple(sorted(map(ord, BIDI_CONTROLS)))  # ALM, LRM, RLM, LRE..RLO, LRI..PDI
_LINE_BREAKS = (0x2028, 0x2029)  # LINE and PARAGRAPH SEPARATOR, new lines to some terminals


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_ESCAPES = {code: _escape(code) for code in (*range(0x20), *range(0x7F, 0xA0), *_BIDI_CONTROLS, *_LINE_BREAKS)}
_IN_ANSWERS = {code: escape for code, escape in _ESCAPES.items() if chr(code) not in "\n\t"}
# json.dumps escapes C0 itself; these it leaves raw with ensure_ascii=False (they are only ever inside strings)
_IN_JSON = {code: f"\\u{code:04x}" for code in _ESCAPES if code >= 0x7F}


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


def json_text(value: Any) -> str:
    """``value`` as one line of JSON (non-ASCII text as it is) in which no character acts on a
    terminal: DEL, C1, bidi controls and line separators are written as ``\\uXXXX`` escapes too."""
    return json.dumps(value, ensure_ascii=False).translate(_IN_JSON)


def visible_lines(text: str) -> str:
    """``text`` with :func:`visible` applied to each of its lines: its newlines are kept."""
    return "\n".join(map(visible, text.split("\n")))


class VisibleLog(logging.Handler):
    """Log records on stderr (as Python's own last resort writes them), each line made visible."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(visible_lines(self.format(record)) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def show_log_lines_visibly() -> None:
    """Write the warnings no handler takes (all of them in a command) through :class:`VisibleLog`."""
    logging.lastResort = VisibleLog(logging.WARNING)


class AnswerText:
    """An answer's pieces as they may be written to ``terminal`` or not (see the module's docstring):
    call it on each piece, then :meth:`end` once for what it held back."""

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self._held_cr = False

    def __call__(self, piece: str) -> str:
        if not self.terminal or not piece:
            return piece
        if self._held_cr:
            piece, self._held_cr = "\r" + piece, False
        if piece.endswith("\r"):
            piece, self._held_cr = piece[:-1], True
        return piece.replace("\r\n", "\n").translate(_IN_ANSWERS)

    def end(self) -> str:
        """A CR the last piece ended with, shown (it was no line end after all)."""
        held, self._held_cr = self._held_cr, False
        return _ESCAPES[0x0D] if held else ""
