"""A new conversation's title, made from its first message: the one rule the window, the CLI and the
API server use (each used to cut the text its own way, one leaving a trailing space that showed as a
double space in the window's title bar)."""

from __future__ import annotations

TITLE_LENGTH = 60  # characters; a longer first line is cut at the last word that fits


def title_of(text: str, fallback: str = "New chat") -> str:
    """The first line of ``text`` that holds anything, its runs of spaces made one, cut to
    :data:`TITLE_LENGTH` characters at a word where one fits; ``fallback`` for a text of blanks."""
    line = next((" ".join(row.split()) for row in text.splitlines() if row.strip()), "")
    if len(line) > TITLE_LENGTH:
        cut = line[:TITLE_LENGTH + 1]
        line = cut.rsplit(" ", 1)[0] if " " in cut[TITLE_LENGTH // 2:] else line[:TITLE_LENGTH]
    return line.rstrip() or fallback
