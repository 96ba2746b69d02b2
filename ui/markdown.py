"""Message text to the rich text a label shows: Markdown, with drafted text marked when asked.

Qt's own Markdown reader (GitHub dialect) does the parsing; the line breaks a model writes inside
a paragraph are kept, as chat apps keep them (:mod:`ui.markdown_breaks`); afterwards code blocks
and inline code are set in the system's fixed-width font on a faint background taken from the
palette, so they read as code in light and dark themes alike.

Drafted spans count characters of the message's source text, but the rendered document shows
fewer (markers, fences and escapes are gone) and other whitespace. Rendering only drops characters
and changes whitespace, so a greedy walk pairs each shown character with the next matching source
character not far ahead (:func:`_source_indices`), and a shown character gets the highlight when
its source character came from an accepted draft. Source text that is never shown and could match
what follows it (a fence's language tag, a link's address) is left out of the walk.
"""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QFontDatabase, QPalette, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat

from ui.markdown_breaks import SOFT_BREAK, mark_soft_breaks


# GitHub's dialect, but HTML in a model's answer is shown as text, never interpreted.
MARKDOWN_FEATURES = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
                     | QTextDocument.MarkdownFeature.MarkdownNoHTML)


LOOKAHEAD = 200  # source characters a shown one may skip (markers, escapes, list and heading marks)
_WHITESPACE = re.compile(r"\s")
# Never shown: a code fence's line with its language tag, and a link's or image's "(address)".
_UNSHOWN = re.compile(r"^ {0,3}(?:`{3,}|~{3,})[^\n]*$|(?<=\])\([^()\s]*(?:\s+\"[^\"\n]*\")?\)", re.MULTILINE)


def markdown_to_html(text: str, palette: QPalette, draft_spans: list | None = None) -> str:
    """The text rendered as Markdown; with ``draft_spans`` ([characters, drafted] covering the text)
    the characters that came from accepted drafts are on a highlight background."""
    doc = QTextDocument()
    doc.setMarkdown(mark_soft_breaks(text), MARKDOWN_FEATURES)
    _drop_spaces_after_breaks(doc)
    _style_code(doc, palette)
    if draft_spans:
        _mark_drafted(doc, _drafted_mask(draft_spans, len(text)), _source_indices(text, doc.toPlainText()), palette)
    return doc.toHtml()


def _drop_spaces_after_breaks(doc: QTextDocument) -> None:
    """Each kept line break reads as "separator, space" (the soft break's space): drop the space.
    (A position in the document is an index into its raw text, block separators included.)"""
    raw = doc.toRawText()
    cursor = QTextCursor(doc)
    at = raw.rfind(SOFT_BREAK)
    while at >= 0:
        cursor.setPosition(at + 1)
        cursor.deleteChar()
        at = raw.rfind(SOFT_BREAK, 0, at)


def _drafted_mask(spans: list, length: int) -> list[bool]:
    """Per source character: did it come from an accepted draft."""
    mask: list[bool] = []
    for count, drafted in spans:
        mask.extend([bool(drafted)] * count)
    return (mask + [False] * length)[:length]


def _source_indices(source: str, shown: str) -> list[int]:
    """For each shown character, the index of the source character it shows, or -1 if none is near."""
    source = _UNSHOWN.sub(lambda match: "\0" * len(match.group()), source)  # same length
    source, shown = _WHITESPACE.sub(" ", source), _WHITESPACE.sub(" ", shown)  # same lengths
    indices, at = [], 0
    for char in shown:
        found = source.find(char, at, at + LOOKAHEAD)
        indices.append(found)
        if found >= 0:
            at = found + 1
    return indices


def _mark_drafted(doc: QTextDocument, drafted: list[bool], sources: list[int], palette: QPalette) -> None:
    """Put the highlight background under each run of shown characters whose source was drafted.
    (A position in the document is an index into its plain text: block breaks count one each.)"""
    marked = QTextCharFormat()
    marked.setBackground(_tint(palette, QPalette.ColorRole.Highlight, 70))
    cursor = QTextCursor(doc)
    run_start = None
    for position, source in enumerate([*sources, -1]):
        is_drafted = source >= 0 and drafted[source]
        if is_drafted and run_start is None:
            run_start = position
        elif not is_drafted and run_start is not None:
            cursor.setPosition(run_start)
            cursor.setPosition(position, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(marked)
            run_start = None


def _style_code(doc: QTextDocument, palette: QPalette) -> None:
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    code_format = QTextCharFormat()
    code_format.setFontFamilies([fixed.family(), "monospace"])
    code_format.setFontFixedPitch(True)
    background = _tint(palette, QPalette.ColorRole.Text, 24)
    block = doc.begin()
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence) or block.blockFormat().nonBreakableLines():
            cursor = QTextCursor(block)
            block_format = block.blockFormat()
            block_format.setBackground(background)
            cursor.setBlockFormat(block_format)
            cursor.select(QTextCursor.SelectionType.BlockUnderCursor)
            cursor.mergeCharFormat(code_format)
        else:
            _style_inline_code(block, code_format)
        block = block.next()


def _style_inline_code(block, code_format: QTextCharFormat) -> None:
    iterator = block.begin()
    while not iterator.atEnd():
        fragment = iterator.fragment()
        if fragment.isValid() and fragment.charFormat().fontFixedPitch():
            cursor = QTextCursor(block.document())
            cursor.setPosition(fragment.position())
            cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(code_format)
        iterator += 1


def _tint(palette: QPalette, role: QPalette.ColorRole, alpha: int) -> QColor:
    colour = QColor(palette.color(role))
    colour.setAlpha(alpha)
    return colour
