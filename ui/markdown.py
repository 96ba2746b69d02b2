"""Message text to the rich text a label shows: Markdown, or the plain text with drafted spans marked.

Qt's own Markdown reader (GitHub dialect) does the parsing; afterwards code blocks and inline code
are set in the system's fixed-width font on a faint background taken from the palette, so they
read as code in light and dark themes alike.
"""

from __future__ import annotations

import html

from PySide6.QtGui import QColor, QFontDatabase, QPalette, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat


# GitHub's dialect, but HTML in a model's answer is shown as text, never interpreted.
MARKDOWN_FEATURES = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
                     | QTextDocument.MarkdownFeature.MarkdownNoHTML)


def markdown_to_html(text: str, palette: QPalette) -> str:
    doc = QTextDocument()
    doc.setMarkdown(text, MARKDOWN_FEATURES)
    _style_code(doc, palette)
    return doc.toHtml()


def drafted_to_html(text: str, spans: list[list], palette: QPalette) -> str:
    """Plain text with the characters that came from accepted drafts on a highlight background."""
    colour = _tint(palette, QPalette.ColorRole.Highlight, 70).name(QColor.NameFormat.HexArgb)
    parts, at = [], 0
    for length, drafted in spans:
        piece = html.escape(text[at:at + length])
        parts.append(f'<span style="background-color:{colour}">{piece}</span>' if drafted else piece)
        at += length
    parts.append(html.escape(text[at:]))
    return f'<p style="white-space:pre-wrap">{"".join(parts)}</p>'


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
