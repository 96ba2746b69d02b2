"""The frame around one message in the chat: a quiet rounded box for a question (the palette's
``AlternateBase``, the grey of the chat apps people know), a framed card for a document, nothing for
an answer (it reads on the chat's own background).

Colours are taken from the palette each time it paints, so a switch between light and dark themes
needs nothing more than a repaint.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter, QPalette, QPen
from PySide6.QtWidgets import QFrame, QWidget

from ui.theme import RADIUS as BUBBLE_RADIUS


class Bubble(QFrame):
    """The frame around one message: a rounded box for a question, a card for a document,
    nothing for an answer. Painted from the current palette, so it follows a theme switch."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("message_bubble")
        self.kind = "answer"

    def set_kind(self, kind: str) -> None:
        self.kind = kind
        self.update()

    def fill_colour(self) -> QColor | None:
        """The background painted under the message (None: the chat's own)."""
        palette = self.palette()
        if self.kind == "question":
            return palette.color(QPalette.ColorRole.AlternateBase)
        if self.kind == "document":
            return palette.color(QPalette.ColorRole.Base)
        return None

    def paintEvent(self, event) -> None:
        fill = self.fill_colour()
        if fill is not None:
            painter = QPainter(self)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            border = self.palette().color(QPalette.ColorRole.Mid) if self.kind == "document" else fill
            painter.setPen(QPen(border, 1))
            painter.setBrush(fill)
            painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), BUBBLE_RADIUS, BUBBLE_RADIUS)
            painter.end()
        super().paintEvent(event)
