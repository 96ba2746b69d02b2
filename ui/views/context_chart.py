"""Memory against context length for one catalogue model and quantization, drawn with QPainter.

Design:

* Two lines: this model, and a transformer of equal size (every layer keeping K and V, no
  recurrent state), both from :func:`model_store.fit.entry_total_bytes`. A model without recurrent
  layers is its own transformer: it gets one line.
* x is the context in tokens on a log scale, from 256 to a power of two past both the trained
  length (a dotted vertical line) and the longest crossing; y is memory, linear, in GiB, from 0 to
  a little above the memory available now. Lines leaving the top are clipped.
* Two horizontal lines: the memory available now, and the budget an automatic context may fill
  (``percent`` of it). The crossing points are where each model line meets the budget
  (:func:`crossing`, the rule of :func:`model_store.fit.longest_context`): the Models list's
  ``memory_context_tokens`` and ``transformer_memory_context_tokens``.
* No context is drawn as usable past the trained length (issue 30): each line is solid up to it and
  thin and dotted beyond, where memory alone counts. The context a line can use
  (:meth:`ChartModel.usable`, :func:`model_store.fit.usable_context`: the list's
  ``max_context_tokens`` and ``transformer_max_context_tokens``) is a dot labelled with its tokens:
  on the budget where memory is the limit, else on the line at the trained length ("trained
  maximum"), with a ring where the line meets the budget labelled as headroom ("memory would hold").
* Colours come from the palette (Highlight for this model, Text for the transformer, secondary
  text for the memory lines), so the chart follows the light or dark theme.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from model_store.catalogue_schema import CatalogueEntry
from model_store.fit import (
    CONTEXT_STEP, LONGEST_CONTEXT, entry_total_bytes, longest_context, memory_budget, usable_context,
)
from ui.formatting import fmt_bytes

TotalBytes = Callable[[int], int]  # context tokens -> bytes the loaded model takes
GIB = 1024**3
SAMPLES = 120  # points per line: smooth at any width on a log axis
HEADROOM = 1.15  # the top of the y axis, over the available memory
MARGINS = (64, 30, 18, 40)  # left, top, right, bottom: room for the axes' labels and the legend
LABEL_BACKGROUND_ALPHA = 210  # of 255: labels sit on the background, the lines faint behind them
EMPTY_TEXT = "Select a quantization to see how much context fits this machine."


def crossing(total_bytes: TotalBytes, level_bytes: int, cap: int = LONGEST_CONTEXT) -> int | None:
    """The longest context (a multiple of 256, at most ``cap``) whose memory is within
    ``level_bytes``: where the line meets that level. None when not even 256 tokens are."""
    return longest_context(total_bytes, level_bytes, cap) or None


def token_range(trained: int, crossings: list[int | None]) -> tuple[int, int]:
    """256 to the power of two a half past the trained length and the longest crossing."""
    furthest = max([trained, *(c for c in crossings if c)])
    return CONTEXT_STEP, min(LONGEST_CONTEXT, 2 ** math.ceil(math.log2(furthest * 1.5)))


def short_tokens(n: int) -> str:
    """``"256"``, ``"64k"``, ``"1M"``: a tick's label (k = 1,024 tokens)."""
    if n < 1024:
        return str(n)
    return f"{n // 1024}k" if n < 1024**2 else f"{n / 1024**2:g}M"


def gib_step(top_bytes: float) -> float:
    """A round step in GiB giving at most 6 ticks up to ``top_bytes``."""
    return next(s for s in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256) if top_bytes / (s * GIB) <= 6)


@dataclass(frozen=True)
class ChartModel:
    """What the chart draws for one file of a catalogue model."""

    name: str
    trained_tokens: int
    hybrid: TotalBytes
    transformer: TotalBytes | None  # None: the model is a transformer itself
    available_bytes: int
    budget_bytes: int

    @classmethod
    def of(cls, entry: CatalogueEntry, file_bytes: int, available_bytes: int, percent: int) -> ChartModel:
        transformer = entry_total_bytes(entry, file_bytes, transformer=True) if entry.state.recurrent_layers else None
        return cls(entry.name, entry.context_length, entry_total_bytes(entry, file_bytes), transformer,
                   available_bytes, memory_budget(available_bytes, percent))

    def lines(self) -> dict[str, TotalBytes]:
        return {"hybrid": self.hybrid, **({"transformer": self.transformer} if self.transformer else {})}

    def crossings(self) -> dict[str, int | None]:
        """Per line, the context the budget holds."""
        return {name: crossing(line, self.budget_bytes) for name, line in self.lines().items()}

    def usable(self) -> dict[str, int | None]:
        """Per line, the context it can use: the budget's, never past the trained length."""
        return {name: (usable_context(held, self.trained_tokens) or None) if held else None
                for name, held in self.crossings().items()}

    def description(self) -> str:
        """The chart in words (its accessible description)."""
        held, usable = self.crossings(), self.usable()

        def words(name: str) -> str:
            if not usable[name]:
                return "not even 256 tokens"
            if held[name] > usable[name]:
                return f"{usable[name]:,} tokens, its trained maximum (memory would hold {held[name]:,})"
            return f"{usable[name]:,} tokens"

        text = f"Within a budget of {fmt_bytes(self.budget_bytes)}, {self.name} can use {words('hybrid')}"
        if "transformer" in held:
            text += f"; a transformer of equal size {words('transformer')}"
        return f"{text}. It was trained on up to {self.trained_tokens:,} tokens."


class ContextChart(QWidget):
    """The chart of a :class:`ChartModel`; empty (a hint) until :meth:`show_model`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("context_chart")
        self.setAccessibleName("Memory against context length")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.model: ChartModel | None = None
        self._scale: tuple[tuple[int, int], float] = ((CONTEXT_STEP, 2 * CONTEXT_STEP), 1.0)

    def show_model(self, model: ChartModel | None) -> None:
        self.model = model
        if model is not None:
            self._scale = _scale(model)
        self.setAccessibleDescription(model.description() if model else EMPTY_TEXT)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(560, 260)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(260, 160)

    # --------------------------------------------------------------------------- geometry

    def plot_rect(self) -> QRectF:
        left, top, right, bottom = MARGINS
        return QRectF(left, top, max(1, self.width() - left - right), max(1, self.height() - top - bottom))

    def _ranges(self) -> tuple[tuple[int, int], float]:
        """((fewest, most tokens), most bytes) the axes show."""
        return self._scale

    def to_point(self, tokens: float, n_bytes: float) -> QPointF:
        """Widget coordinates of ``tokens`` of context taking ``n_bytes``."""
        (low, high), top = self._ranges()
        rect = self.plot_rect()
        x = rect.left() + math.log(tokens / low) / math.log(high / low) * rect.width()
        return QPointF(x, rect.bottom() - n_bytes / top * rect.height())

    def line_points(self, name: str) -> list[QPointF]:
        """The points ``name`` ("hybrid" or "transformer") is drawn through, left to right."""
        (low, high), _ = self._ranges()
        line = self.model.lines()[name]
        tokens = (low * (high / low) ** (i / (SAMPLES - 1)) for i in range(SAMPLES))
        return [self.to_point(n, line(round(n))) for n in tokens]

    # --------------------------------------------------------------------------- painting

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.model is None:
            painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, EMPTY_TEXT)
        else:  # labels last, over the lines, so they stay readable
            self._paint_axes(painter)
            self._paint_lines(painter)
            self._paint_labels(painter)
            self._paint_legend(painter)
        painter.end()

    def _colour(self, role: QPalette.ColorRole) -> QColor:
        return self.palette().color(role)

    def _levels(self) -> tuple[tuple[int, Qt.PenStyle, str], ...]:
        """The horizontal lines: bytes, pen style, label."""
        model = self.model
        return ((model.available_bytes, Qt.PenStyle.DashLine, f"available now: {fmt_bytes(model.available_bytes)}"),
                (model.budget_bytes, Qt.PenStyle.SolidLine, f"budget: {fmt_bytes(model.budget_bytes)}"))

    def _paint_axes(self, painter: QPainter) -> None:
        """The grid with its GiB and token ticks, the trained length and the memory levels."""
        rect, ((low, high), top) = self.plot_rect(), self._ranges()
        grid, text = self._colour(QPalette.ColorRole.Mid), self._colour(QPalette.ColorRole.Text)
        step = gib_step(top)
        for i in range(int(top / (step * GIB)) + 1):
            y = self.to_point(low, i * step * GIB).y()
            painter.setPen(QPen(grid, 0.5))
            painter.drawLine(QPointF(rect.left(), y), QPointF(rect.right(), y))
            painter.setPen(text)
            painter.drawText(QRectF(0, y - 8, rect.left() - 6, 16), Qt.AlignmentFlag.AlignRight, f"{i * step:g} GiB")
        tokens = low
        while tokens <= high:
            x = self.to_point(tokens, 0).x()
            painter.setPen(QPen(grid, 0.5))
            painter.drawLine(QPointF(x, rect.top()), QPointF(x, rect.bottom()))
            painter.setPen(text)
            painter.drawText(QRectF(x - 30, rect.bottom() + 2, 60, 16), Qt.AlignmentFlag.AlignHCenter,
                             short_tokens(tokens))
            tokens *= 4
        painter.drawText(QRectF(rect.left(), rect.bottom() + 18, rect.width(), 18), Qt.AlignmentFlag.AlignHCenter,
                         "context length, tokens (log scale)")
        trained_x = self.to_point(self.model.trained_tokens, 0).x()
        painter.setPen(QPen(text, 1, Qt.PenStyle.DotLine))
        painter.drawLine(QPointF(trained_x, rect.top()), QPointF(trained_x, rect.bottom()))
        secondary = self._colour(QPalette.ColorRole.PlaceholderText)
        for n_bytes, style, _ in self._levels():
            y = self.to_point(low, n_bytes).y()
            painter.setPen(QPen(secondary, 1, style))
            painter.drawLine(QPointF(rect.left(), y), QPointF(rect.right(), y))

    def _line_pens(self) -> dict[str, QPen]:
        return {"hybrid": QPen(self._colour(QPalette.ColorRole.Highlight), 2.2),
                "transformer": QPen(self._colour(QPalette.ColorRole.Text), 1.6, Qt.PenStyle.DashLine)}

    def _headroom_pen(self, pen: QPen) -> QPen:
        """A line past the trained length: memory alone, no context the model can use."""
        return QPen(pen.color(), 1, Qt.PenStyle.DotLine)

    def _paint_lines(self, painter: QPainter) -> None:
        """Each line solid up to the trained length, dotted past it."""
        rect, pens = self.plot_rect(), self._line_pens()
        trained_x = min(max(self.to_point(self.model.trained_tokens, 0).x(), rect.left()), rect.right())
        trained = QRectF(rect.left(), rect.top(), trained_x - rect.left(), rect.height())
        beyond = QRectF(trained_x, rect.top(), rect.right() - trained_x, rect.height())
        for name in self.model.lines():
            points = QPolygonF(self.line_points(name))
            for clip, pen in ((trained, pens[name]), (beyond, self._headroom_pen(pens[name]))):
                painter.save()
                painter.setClipRect(clip)
                painter.setPen(pen)
                painter.drawPolyline(points)
                painter.restore()

    def usable_point(self, name: str) -> QPointF | None:
        """Where the dot of the context ``name`` can use goes: on the budget where memory is the
        limit, else on the line at the trained length; None when not even 256 tokens fit."""
        tokens, held = self.model.usable()[name], self.model.crossings()[name]
        if tokens is None:
            return None
        if held > tokens:
            return self.to_point(tokens, self.model.lines()[name](tokens))
        return self.to_point(min(tokens, self._ranges()[0][1]), self.model.budget_bytes)

    def _paint_labels(self, painter: QPainter) -> None:
        """The trained length (right of its line, or left where the plot ends first), the memory
        levels, and per line the context it can use (a dot) and any headroom (a ring)."""
        rect, pens = self.plot_rect(), self._line_pens()
        trained_x = self.to_point(self.model.trained_tokens, 0).x()
        trained = f"trained maximum: {self.model.trained_tokens:,}"
        width = painter.fontMetrics().horizontalAdvance(trained) + 4
        x = trained_x + 4 if trained_x + 4 + width <= rect.right() else trained_x - 4 - width
        self._boxed_text(painter, QPointF(x, rect.top() + 2), trained, self._colour(QPalette.ColorRole.Text))
        for n_bytes, _, label in self._levels():
            y = self.to_point(CONTEXT_STEP, n_bytes).y()
            self._boxed_text(painter, QPointF(rect.left() + 4, y - 16), label,
                             self._colour(QPalette.ColorRole.PlaceholderText))  # at the left, where the lines run low
        held, marks = self.model.crossings(), []  # (point, colour, filled): drawn over every label
        for name, tokens in self.model.usable().items():
            if tokens is None:
                continue
            colour, below = pens[name].color(), name != "hybrid"
            if held[name] > tokens:  # memory would hold more: a ring there, headroom, not context
                ring = self.to_point(min(held[name], self._ranges()[0][1]), self.model.budget_bytes)
                self._point_label(painter, ring, f"memory would hold {held[name]:,}", colour, below)
                marks.append((ring, colour, False))
                text, below = f"{tokens:,} tokens (trained maximum)", True  # under the budget, clear of its labels
            else:
                text = f"{tokens:,} tokens"
            point = self.usable_point(name)
            self._point_label(painter, point, text, colour, below)
            marks.append((point, colour, True))
        for point, colour, filled in marks:
            painter.setPen(Qt.PenStyle.NoPen if filled else QPen(colour, 1.5))
            painter.setBrush(colour if filled else Qt.BrushStyle.NoBrush)
            painter.drawEllipse(point, 4, 4)
        painter.setBrush(Qt.BrushStyle.NoBrush)

    def _point_label(self, painter: QPainter, point: QPointF, text: str, colour: QColor, below: bool) -> None:
        """``text`` centred over ``point`` (under it when ``below``), kept inside the plot."""
        rect = self.plot_rect()
        width = painter.fontMetrics().horizontalAdvance(text) + 4
        x = min(max(point.x() - width / 2, rect.left()), rect.right() - width)
        self._boxed_text(painter, QPointF(x, point.y() + 6 if below else point.y() - 22), text, colour)

    def _boxed_text(self, painter: QPainter, top_left: QPointF, text: str, colour: QColor) -> None:
        """``text`` on a patch of the background, so lines under it do not cross it out."""
        metrics = painter.fontMetrics()
        box = QRectF(top_left.x(), top_left.y(), metrics.horizontalAdvance(text) + 4, metrics.height())
        background = self._colour(QPalette.ColorRole.Window)
        background.setAlpha(LABEL_BACKGROUND_ALPHA)
        painter.fillRect(box, background)
        painter.setPen(colour)
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_legend(self, painter: QPainter) -> None:
        pens, names = self._line_pens(), {"hybrid": self.model.name, "transformer": "a transformer of equal size"}
        x = self.plot_rect().left()
        for name in self.model.lines():
            painter.setPen(pens[name])
            painter.drawLine(QPointF(x, 12), QPointF(x + 22, 12))
            painter.setPen(self._colour(QPalette.ColorRole.Text))
            painter.drawText(QPointF(x + 28, 16), names[name])
            x += 40 + painter.fontMetrics().horizontalAdvance(names[name])


def _scale(model: ChartModel) -> tuple[tuple[int, int], float]:
    """The axes' ranges for ``model``: see the module's docstring."""
    x_range = token_range(model.trained_tokens, list(model.crossings().values()))
    return x_range, max(model.available_bytes, model.hybrid(CONTEXT_STEP)) * HEADROOM
