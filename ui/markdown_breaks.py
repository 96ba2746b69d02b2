"""Keeping the line breaks a model writes inside a paragraph (GitHub's "breaks" behaviour in chat).

Markdown joins the lines of a paragraph into one (a single line break is a *soft* break, shown as
a space), so a poem or an address a model writes line by line would run together. A hard break
(two trailing spaces) is no better in Qt's reader: it starts a new paragraph, with paragraph
spacing, and in a list item a new item. So :func:`mark_soft_breaks` puts a line separator
(U+2028, which Markdown reads as text) at the end of each line that continues in the next line of
the same paragraph; the rendered document then holds "separator, space" there, and the renderer
drops the space (:data:`SOFT_BREAK`), leaving a line break inside the paragraph.

Only lines that are continued in the same block get the mark: not code (fenced or indented), not
table rows, not a heading or a thematic break, and not a line followed by the start of another
block (a list item, a heading, a fence, a quote, a setext underline, a blank line). Lists stay
lists: a line inside a list item breaks inside the item.
"""

from __future__ import annotations

import re

LINE_SEPARATOR = "\u2028"
SOFT_BREAK = LINE_SEPARATOR + " "  # what a marked line end becomes in the rendered document

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])(\s|$)")
_QUOTE = re.compile(r"^ {0,3}>")
_RULE_OR_UNDERLINE = re.compile(r"^ {0,3}(?:(?:[-*_][ \t]*){3,}|=+[ \t]*|-+[ \t]*)$")
_INDENTED = re.compile(r"^(?: {4}|\t)")


def mark_soft_breaks(text: str) -> str:
    """``text`` with :data:`LINE_SEPARATOR` before each newline that is a soft break in a paragraph."""
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None  # the open fence's marker, inside a fenced code block
    indented_code = False
    previous_blank = True
    for line, following in zip(lines, lines[1:] + [None]):
        opened = _FENCE.match(line)
        blank = not line.strip()
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
        elif opened and not indented_code:
            fence = opened.group(1)
        else:
            indented = _INDENTED.match(line) is not None
            indented_code = (indented_code or previous_blank) and (indented or (blank and indented_code))
            if not indented_code and _continues(line, following):
                line += LINE_SEPARATOR
        out.append(line)
        previous_blank = blank
    return "\n".join(out)


def _continues(line: str, following: str | None) -> bool:
    """Whether ``following`` is the next line of the paragraph that ``line`` is in."""
    if following is None or not line.strip() or not following.strip() or line.endswith("\\"):
        return False  # (a backslash at the end is a break already; before the separator it would show)
    if _ATX_HEADING.match(line) or _RULE_OR_UNDERLINE.match(line) or ("|" in line and "|" in following):
        return False
    starts_a_block = (_FENCE, _ATX_HEADING, _LIST_ITEM, _RULE_OR_UNDERLINE)
    if any(pattern.match(following) for pattern in starts_a_block):
        return False
    return not _QUOTE.match(following) or bool(_QUOTE.match(line))  # a quote's own lines continue it
