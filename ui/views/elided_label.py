"""One line of text that never asks for more room than it is given.

A plain QLabel's minimum width is its text's: a status line that grows ("No snapshot used (…); the
next answer reads the conversation again.") widens the column it sits in, and the splitter takes
that width from the conversation list, clipping the model picker and the search field as it goes.
This label takes the width the layout has left and cuts its text with "…" to fit, the whole text
in its tooltip (with any details set by :meth:`ElidedLabel.set_details` below it);
:meth:`ElidedLabel.text` is always the whole text.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._details = ""
        self._essential: str | None = None  # the beginning that must show whole (None: all of it)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        self._full = text or ""
        self.setAccessibleName(self._full)
        self._fit()

    def set_details(self, details: str) -> None:
        """What the tooltip says besides the text when it is cut ("": nothing)."""
        self._details = details or ""
        self._fit()

    def set_essential(self, essential: str | None) -> None:
        """The beginning of the text that must show whole (the model and what it reads); what follows
        it may be cut. ``None``: all of the text is essential."""
        self._essential = essential

    @property
    def elided(self) -> bool:
        """Whether the text is cut to fit (the whole of it is then in the tooltip)."""
        return super().text() != self._full

    @property
    def essential_elided(self) -> bool:
        """Whether the part of the text that must show (:meth:`set_essential`) is cut."""
        essential = self._full if self._essential is None else self._essential
        return self.elided and not super().text().startswith(essential)

    def essential_width(self) -> int:
        """The width the essential part takes (with the "…" that follows it when the rest is cut)."""
        essential = self._full if self._essential is None else self._essential
        tail = "" if essential == self._full else "…"
        margins = self.contentsMargins()
        return self.fontMetrics().horizontalAdvance(essential + tail) + margins.left() + margins.right() + 1

    def text(self) -> str:
        """The whole text, however much of it shows."""
        return self._full

    def shown_text(self) -> str:
        """What fits: the text, or its beginning and "…"."""
        return super().text()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        width = self.contentsRect().width()
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(width, 0))
        super().setText(shown)
        self.setToolTip("\n".join(part for part in (self._full if shown != self._full else "", self._details) if part))
