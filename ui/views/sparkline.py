"""A tiny line chart of the most recent values of one measurement (e.g. decode speed).

Design:

* The widget keeps only a bounded :class:`collections.deque` of the last ``capacity`` values;
  appending beyond it drops the oldest, so memory is constant however long the app runs.
* Samples sit at fixed horizontal steps of ``width / (capacity - 1)`` with the newest at the
  right edge, so a chart that is still filling grows from the right and time runs at a steady
  pace across the widget.
* The vertical scale is 0 at the bottom and the largest *visible* value at the top: old peaks
  leave the scale when they leave the window. Negative and non-finite values draw as 0.
* Colours come from the widget's palette (``Highlight`` for the line and, translucent, for the
  area below it), so the chart follows the system light/dark theme and repaints correctly when
  the palette changes. An empty chart paints nothing.
"""

from __future__ import annotations

import math
from collections import deque

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

DEFAULT_CAPACITY = 60
FILL_ALPHA = 60  # of 255: the area under the line, translucent over the panel background
LINE_WIDTH = 1.5


def _drawable(value: float) -> float:
    """The height a value is drawn at: 0 for negative, NaN or infinite values."""
    return value if math.isfinite(value) and value > 0 else 0.0


class Sparkline(QWidget):
    """The last ``capacity`` values of one measurement, drawn as a filled polyline."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        parent: QWidget | None = None,
        *,
        accessible_name: str = "Sparkline",
        accessible_description: str = "",
    ) -> None:
        super().__init__(parent)
        if capacity < 2:
            raise ValueError(f"a sparkline needs room for at least 2 values, not {capacity}")
        self._values: deque[float] = deque(maxlen=capacity)
        self.setMinimumSize(self.minimumSizeHint())
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(accessible_name)
        self.setAccessibleDescription(
            accessible_description or f"A line chart of the last {capacity} values"
        )

    # ------------------------------------------------------------------------------ data

    @property
    def capacity(self) -> int:
        return self._values.maxlen or DEFAULT_CAPACITY

    def add(self, value: float) -> None:
        """Append one value (dropping the oldest when full) and repaint."""
        self._values.append(float(value))
        self.update()

    def values(self) -> list[float]:
        """The stored values, oldest first."""
        return list(self._values)

    def clear(self) -> None:
        self._values.clear()
        self.update()

    # ------------------------------------------------------------------------------ size

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(120, 28)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(40, 16)

    # ---------------------------------------------------------------------------- painting

    def _points(self) -> list[QPointF]:
        """Widget coordinates of the stored values, newest at the right edge."""
        heights = [_drawable(v) for v in self._values]
        if len(heights) == 1:  # one sample: a short flat segment, so it is visible
            heights = heights * 2
        top = max(heights, default=0.0)
        step = (self.width() - 1) / (self.capacity - 1)
        usable_height = self.height() - LINE_WIDTH
        bottom = self.height() - LINE_WIDTH / 2
        first_x = (self.width() - 1) - step * (len(heights) - 1)
        return [
            QPointF(first_x + i * step, bottom - (h / top * usable_height if top > 0 else 0.0))
            for i, h in enumerate(heights)
        ]

    def _area_under(self, points: list[QPointF]) -> QPolygonF:
        bottom = float(self.height())
        return QPolygonF([QPointF(points[0].x(), bottom), *points, QPointF(points[-1].x(), bottom)])

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        if not self._values:
            return
        points = self._points()
        line_colour = self.palette().color(QPalette.ColorRole.Highlight)
        fill_colour = QColor(line_colour)
        fill_colour.setAlpha(FILL_ALPHA)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(fill_colour)
        painter.drawPolygon(self._area_under(points))
        painter.setPen(QPen(line_colour, LINE_WIDTH))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPolyline(QPolygonF(points))
        painter.end()
