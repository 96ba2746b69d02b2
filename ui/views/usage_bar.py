"""A bar that fills as a conversation uses the memory set aside for it.

It sits under the telemetry row "Memory this conversation uses" and shows that row's number: the
part of the attention cache (the memory that grows with the conversation) in use, out of what the
context set aside. Empty at the start of a conversation, full when the context is. (It used to show
the split between the fixed and the growing state, unlabelled: a bar that looked full at 0 %.)

Colours come from the palette only: the used part in ``Highlight``, the empty track in ``Base``
with a ``Mid`` outline, so light and dark themes both work. With nothing set aside only the empty
track is drawn.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget


class UsageBar(QWidget):
    """``used`` of ``capacity`` bytes, as a filled share of the track."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._used = 0
        self._capacity = 0
        self.setMinimumSize(self.minimumSizeHint())
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("Memory this conversation uses")
        self._describe()

    def set_usage(self, used: int, capacity: int) -> None:
        """Show new sizes (negative sizes count as 0) and repaint."""
        self._used = max(0, int(used))
        self._capacity = max(0, int(capacity))
        self._describe()
        self.update()

    def usage(self) -> tuple[int, int]:
        """``(used, capacity)`` as last set."""
        return self._used, self._capacity

    def clear(self) -> None:
        self.set_usage(0, 0)

    def fraction(self) -> float | None:
        """The share in use (at most 1), or ``None`` when nothing is set aside."""
        return min(1.0, self._used / self._capacity) if self._capacity else None

    def _describe(self) -> None:
        fraction = self.fraction()
        self.setAccessibleDescription("Nothing set aside yet" if fraction is None
                                      else f"{round(fraction * 100)}% of the memory set aside for this conversation")

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(120, 10)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(40, 6)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        palette = self.palette()
        track = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter = QPainter(self)
        painter.setPen(palette.color(QPalette.ColorRole.Mid))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRect(track)
        fraction = self.fraction()
        if fraction:
            inner = track.adjusted(1, 1, -1, -1)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(palette.color(QPalette.ColorRole.Highlight))
            painter.drawRect(QRectF(inner.left(), inner.top(), inner.width() * fraction, inner.height()))
        painter.end()
