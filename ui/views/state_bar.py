"""A two-segment bar showing how a sequence's state memory splits into fixed and growing parts.

A hybrid model's live state has a recurrent part that stays the same size however long the
conversation gets, and an attention KV cache that grows with every token. The bar shows their
proportions side by side (fixed on the left, growing on the right) so the user sees at a glance
which part dominates; the exact numbers sit in labels next to it.

Colours come from the palette only: the fixed part in ``Mid``, the growing part in
``Highlight``, the empty track in ``Base`` with a ``Mid`` outline, so light and dark themes both
work. With nothing to show (both parts 0) only the empty track is drawn.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget


class StateBar(QWidget):
    """Fixed (recurrent) versus growing (attention KV) state bytes, as proportions of their sum."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fixed_bytes = 0
        self._kv_bytes = 0
        self.setMinimumSize(self.minimumSizeHint())
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("State memory split")
        self._describe()

    def set_parts(self, fixed_bytes: int, kv_bytes: int) -> None:
        """Show new sizes (negative sizes count as 0) and repaint."""
        self._fixed_bytes = max(0, int(fixed_bytes))
        self._kv_bytes = max(0, int(kv_bytes))
        self._describe()
        self.update()

    def parts(self) -> tuple[int, int]:
        """``(fixed_bytes, kv_bytes)`` as last set."""
        return self._fixed_bytes, self._kv_bytes

    def clear(self) -> None:
        self.set_parts(0, 0)

    def fixed_fraction(self) -> float | None:
        """The fixed part's share of the total, or ``None`` when there is no state."""
        total = self._fixed_bytes + self._kv_bytes
        return self._fixed_bytes / total if total else None

    def _describe(self) -> None:
        fraction = self.fixed_fraction()
        if fraction is None:
            self.setAccessibleDescription("No sequence state")
            return
        fixed_percent = round(fraction * 100)
        self.setAccessibleDescription(
            f"{fixed_percent}% fixed (recurrent), {100 - fixed_percent}% growing (attention KV)"
        )

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
        fraction = self.fixed_fraction()
        if fraction is not None:
            inner = track.adjusted(1, 1, -1, -1)
            fixed_width = inner.width() * fraction
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(palette.color(QPalette.ColorRole.Mid))
            painter.drawRect(QRectF(inner.left(), inner.top(), fixed_width, inner.height()))
            painter.setBrush(palette.color(QPalette.ColorRole.Highlight))
            painter.drawRect(
                QRectF(inner.left() + fixed_width, inner.top(), inner.width() - fixed_width, inner.height())
            )
        painter.end()
