"""A word-wrapped rich-text label that measures itself once per text and width.

Qt's layouts ask every label in the chat for its size whenever anything in the chat changes (an
answer growing by a few tokens does it 15 times a second). A plain QLabel lays out its whole
document again for each question: 3-17 ms for a long message, for each message, each time. This
label remembers the answers until its text, font or style changes.

It is a rich-text label unless told otherwise: one set to plain text (a model's reasoning) is
measured as plain text too.

A label that :attr:`~MessageText.shrink_to_text` (a question's bubble) asks for the width its
text needs, so a short question gets a small bubble; other labels take the column's width.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QWidget


PREFERRED_WIDTH = 480


class MessageText(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self._heights: dict[int, int] = {}
        self._last_width = 0  # the width the layout last asked about: the one it will use
        self._text_width: int | None = None  # the width the text needs unwrapped, once measured
        self.shrink_to_text = False

    def setText(self, text: str) -> None:
        self._forget()
        super().setText(text)

    def heightForWidth(self, width: int) -> int:
        self._last_width = width
        if width not in self._heights:
            if len(self._heights) > 64:
                self._heights.clear()
            self._heights[width] = super().heightForWidth(width)
        return self._heights[width]

    def sizeHint(self) -> QSize:
        """The height at the current width. (QLabel searches for a pleasing width instead, laying
        the text out many times; in a chat the width is the column's, so that search is wasted.)"""
        width = self._last_width or (self.width() if self.width() > 0 else PREFERRED_WIDTH)
        return QSize(self.text_width() if self.shrink_to_text else PREFERRED_WIDTH, self.heightForWidth(width))

    def text_width(self) -> int:
        """The width the text takes on one line per paragraph (measured once per text and font)."""
        if self._text_width is None:
            doc = QTextDocument()
            doc.setDefaultFont(self.font())
            doc.setDocumentMargin(0)
            if self.textFormat() == Qt.TextFormat.PlainText:  # model text shown as data (a reasoning)
                doc.setPlainText(self.text())
            else:
                doc.setHtml(self.text())
            margins = self.contentsMargins()
            self._text_width = math.ceil(doc.idealWidth()) + margins.left() + margins.right() + 2
        return self._text_width

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            self._forget()
        super().changeEvent(event)

    def _forget(self) -> None:
        self._heights.clear()
        self._text_width = None
