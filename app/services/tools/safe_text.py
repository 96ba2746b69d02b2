"""Text from a tool, made safe to show and to give to the model: terminal escapes and control
characters removed, and the length capped with a note saying so.

What a tool returns is data written by a program, and it ends up in two places: the window, which shows
it, and the model's prompt. Terminal escape sequences (colours, ``ESC ] 0 ; title BEL`` that retitles a
terminal, cursor moves) mean nothing there but can hide or rewrite text where it is displayed raw (a
log, a terminal), so they are removed whole; what is left of any other C0 or C1 control character
(NUL, backspace, bell, the 8-bit CSI …) is removed too, except the newline and the tab. A carriage
return becomes a newline, since a lone one only served to overwrite a line. Lone UTF-16 surrogates,
which a JSON string can carry but UTF-8 cannot encode, are removed.

Chat-template markers such as ``<|im_start|>`` are left as they are: the worker reads a tool's result
as plain text, never as the model's special tokens (engine.templates), so they are harmless words.
"""

from __future__ import annotations

import re

MAX_RESULT_CHARS = 16_000  # what the model reads of one tool result, and the window shows
CUT_NOTE = "Cut here: the result had"  # begins the note a cut result ends with
# Cleaning can only shorten text, so more than this of the raw text never needs to be looked at; a
# generous margin keeps a result whose first part is all escapes from coming out nearly empty.
_CLEAN_WINDOW = 64 * MAX_RESULT_CHARS

_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: "ESC ] ... BEL" or "... ST" (or never ended)
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, 8-bit form
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS strings up to the string terminator
    r"|[\x90\x9e\x9f\x98][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # the same, 8-bit forms
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: colours, cursor moves
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # CSI, 8-bit form
    r"|\x1b[ -/]*[0-~]?"  # any other escape: ESC, intermediates, final byte
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` without terminal escapes, control characters (except ``\\n`` and ``\\t``) or lone
    surrogates; carriage returns become newlines. Only the first part of a huge text is looked at
    (more than :func:`capped` keeps)."""
    text = text[:_CLEAN_WINDOW]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def capped(text: str, limit: int = MAX_RESULT_CHARS, *, total: int | None = None) -> str:
    """``text`` if it has at most ``limit`` characters; else its beginning and a note saying how much
    there was, together at most ``limit`` characters. ``total``: the length of the text before it was
    cleaned or cut, when that is longer."""
    total = max(total or 0, len(text))
    if total <= limit:
        return text
    note = f"\n[{CUT_NOTE} {total:,} characters, more than the {limit:,} a tool result may have.]"
    return text[: max(0, limit - len(note))] + note


def safe(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text`` cleaned (:func:`clean`) and capped (:func:`capped`)."""
    return capped(clean(text), limit, total=len(text))


def one_line(text: str, limit: int = 200) -> str:
    """A piece of a program's text to quote inside a sentence: cleaned, on one line, at most ``limit``
    characters (ending in "…" when cut)."""
    line = " ".join(clean(text[: limit * 4]).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
