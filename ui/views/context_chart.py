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
* No context is drawn as usable past the trained length: each line is solid up to it and
  thin and dotted beyond, where memory alone counts. The context a line can use
  (:meth:`ChartModel.usable`, :func:`model_store.fit.usable_context`: the list's
  ``max_context_tokens`` and ``transformer_max_context_tokens``) is a dot: on the budget where memory
  is the limit, else on the line at the trained length, with a ring where the line meets the budget
  (headroom: memory would hold more than the model can use).
* Every word is outside the plot, so no label ever covers a line or another label: the tick labels
  (thinned until they do not touch), the axis title, and a legend under it that says what each
  line, dot and ring is, with its figure, laid out in rows that wrap (:meth:`ContextChart.layout`,
  which the painting and the tests share). The widget asks for the height its legend needs at
  its width (:meth:`ContextChart.heightForWidth`).
* Colours come from the palette (Highlight for this model, Text for the transformer, secondary
  text for the memory lines), so the chart follows the light or dark theme.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from model_store.catalogue_schema import CatalogueEntry
from model_store.fit import (
    CONTEXT_STEP, LONGEST_CONTEXT, entry_total_bytes, longest_context, memory_budget, usable_context,
)
from ui.formatting import fmt_bytes
from ui.model_words import gb

TotalBytes = Callable[[int], int]  # context tokens -> bytes the loaded model takes
GIB = 1024**3
SAMPLES = 120  # points per line: smooth at any width on a log axis
HEADROOM = 1.15  # the top of the y axis, over the available memory
PAD = 6  # around the chart and between its parts
MARK_WIDTH = 24  # a legend entry's sample of its line or dot
PLOT_HEIGHT = 150  # the plot's height the widget asks for, over the room its words need
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


def gib_step(top_bytes: float, most: int = 6) -> float:
    """A round step in GiB giving at most ``most`` ticks up to ``top_bytes``."""
    steps = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    return next((s for s in steps if top_bytes / (s * GIB) <= max(1, most)), steps[-1])


def gb_tick(value: float) -> str:
    return f"{value:g} GB"


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


@dataclass(frozen=True)
class LegendEntry:
    """One entry of the legend: a sample (``kind``: line, dashed, dot, ring, trained, free, budget) and its words."""

    kind: str
    text: str
    colour: QColor
    mark: QRectF
    box: QRectF  # where its text goes (wrapped when the row is too narrow for it)


@dataclass(frozen=True)
class ChartLayout:
    """Where everything goes at one size: the plot, and every text outside it."""

    plot: QRectF
    ticks: list[tuple[QRectF, str]]  # the axes' tick labels
    title: QRectF
    legend: list[LegendEntry]

    def label_rects(self) -> list[tuple[QRectF, str]]:
        """Every rectangle that holds words or a legend sample, with its text."""
        marks = [(entry.mark, f"sample of {entry.text}") for entry in self.legend]
        return [*self.ticks, (self.title, AXIS_TITLE), *((e.box, e.text) for e in self.legend), *marks]


AXIS_TITLE = "how much it reads at once, in tokens (a token is about ¾ of a word; log scale)"


class ContextChart(QWidget):
    """The chart of a :class:`ChartModel`; empty (a hint) until :meth:`show_model`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("context_chart")
        self.setAccessibleName("Memory against how much the model reads at once")
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.model: ChartModel | None = None
        self._scale: tuple[tuple[int, int], float] = ((CONTEXT_STEP, 2 * CONTEXT_STEP), 1.0)
        self._plot: QRectF | None = None  # the last layout's plot, for the size and font in _plot_key
        self._plot_key: tuple | None = None

    def show_model(self, model: ChartModel | None) -> None:
        self.model = model
        self._plot = None
        if model is not None:
            self._scale = _scale(model)
        self.setAccessibleDescription(model.description() if model else EMPTY_TEXT)
        self.updateGeometry()  # the legend, and so the height wanted, changed
        self.update()

    # --------------------------------------------------------------------------- size

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        """The plot's :data:`PLOT_HEIGHT` and the room its words need at ``width``."""
        if self.model is None:
            return 3 * self.fontMetrics().height()
        legend = self._legend_height(self._legend_entries(), width)
        return round(PLOT_HEIGHT + self._under_plot(width) + legend + self._top())

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(560, self.heightForWidth(560))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(260, 3 * self.fontMetrics().height())

    # --------------------------------------------------------------------------- layout

    def _top(self) -> float:
        return PAD + self.fontMetrics().height() / 2  # the top tick's label reaches above the plot

    def _wrapped(self, text: str, width: float) -> QSize:
        """The size ``text`` takes wrapped in ``width`` pixels."""
        flags = int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap)
        return self.fontMetrics().boundingRect(QRect(0, 0, max(1, int(width)), 100_000), flags, text).size()

    def _under_plot(self, width: int) -> float:
        """The tick labels' row and the axis title (wrapped to ``width``) under the plot."""
        line = self.fontMetrics().height()
        return 2 + line + PAD / 2 + self._wrapped(AXIS_TITLE, width - 2 * PAD).height() + PAD

    def _legend_entries(self) -> list[tuple[str, str, QColor]]:
        """(kind, words, colour) of each entry, in reading order."""
        model, pens = self.model, self._line_pens()
        names = {"hybrid": model.name, "transformer": "a usual model of the same size (a transformer)"}
        usable, held = model.usable(), model.crossings()
        entries = []
        for name in model.lines():
            colour, who = pens[name].color(), ("" if name == "hybrid" else "usual model: ")
            entries.append(("line" if name == "hybrid" else "dashed", names[name], colour))
            if usable[name] is None:
                entries.append(("dot", f"{who}not even 256 tokens fit", colour))
                continue
            entries.append(("dot", f"{who}reads {usable[name]:,} tokens at once here", colour))
            if held[name] > usable[name]:
                entries.append(("ring", f"{who}memory would hold {held[name]:,} (more than it was trained for)", colour))
        secondary = self._colour(QPalette.ColorRole.PlaceholderText)
        entries += [("trained", f"trained on up to {model.trained_tokens:,} tokens", self._colour(QPalette.ColorRole.Text)),
                    ("free", f"free memory now: {gb(model.available_bytes)}", secondary),
                    ("budget", f"Hearth's limit: {gb(model.budget_bytes)}", secondary)]
        return entries

    def _flow(self, entries: list[tuple[str, str, QColor]], width: int, top: float) -> list[LegendEntry]:
        """The entries in rows from ``top``, wrapping to ``width``; an entry wider than a row wraps its words."""
        metrics, line = self.fontMetrics(), self.fontMetrics().height()
        left, right = PAD, max(PAD + MARK_WIDTH + 40, width - PAD)
        x, y, row_height, placed = left, top, 0.0, []
        for kind, text, colour in entries:
            text_width = min(metrics.horizontalAdvance(text) + 2, right - left - MARK_WIDTH - PAD)
            size = self._wrapped(text, text_width)
            entry_width = MARK_WIDTH + PAD + text_width
            if x > left and x + entry_width > right:
                x, y, row_height = left, y + row_height + PAD / 2, 0.0
            mark = QRectF(x, y, MARK_WIDTH, line)
            placed.append(LegendEntry(kind, text, colour, mark, QRectF(x + MARK_WIDTH + PAD, y, text_width, size.height())))
            x += entry_width + 2 * PAD
            row_height = max(row_height, size.height())
        return placed

    def _legend_height(self, entries: list[tuple[str, str, QColor]], width: int) -> float:
        placed = self._flow(entries, width, 0)
        return max((entry.box.bottom() for entry in placed), default=0)

    def layout(self) -> ChartLayout:
        """Where the plot, the tick labels, the axis title and the legend go at the widget's size."""
        width, height, metrics = self.width(), self.height(), self.fontMetrics()
        entries = self._legend_entries()
        legend_height = self._legend_height(entries, width)
        under = self._under_plot(width)
        top = self._top()
        plot_height = max(1.0, height - top - under - legend_height)
        y_ticks = self._y_ticks(plot_height)
        left = PAD + max(metrics.horizontalAdvance(text) for _, text in y_ticks) + PAD
        plot = QRectF(left, top, max(1.0, width - left - 2 * PAD), plot_height)
        self._plot, self._plot_key = plot, self._size_key()
        line = metrics.height()
        ticks = [(QRectF(PAD, self.to_point(CONTEXT_STEP, value).y() - line / 2, left - 2 * PAD, line), text)
                 for value, text in y_ticks]
        ticks += self._x_ticks(plot)
        title_size = self._wrapped(AXIS_TITLE, width - 2 * PAD)
        title = QRectF((width - title_size.width()) / 2, plot.bottom() + 2 + line + PAD / 2, title_size.width(),
                       title_size.height())
        legend = self._flow(entries, width, title.bottom() + PAD)
        return ChartLayout(plot, ticks, title, legend)

    def _y_ticks(self, plot_height: float) -> list[tuple[float, str]]:
        """(bytes, label) of the memory ticks: a round step, thinned until their labels do not touch."""
        top = self._ranges()[1]
        most = min(6, int(plot_height // (self.fontMetrics().height() + 4)))
        step = gib_step(top, most)
        return [(i * step * GIB, gb_tick(i * step)) for i in range(int(top / (step * GIB)) + 1)]

    def _x_ticks(self, plot: QRectF) -> list[tuple[QRectF, str]]:
        """Token ticks every factor of 4 (of 16 where their labels would touch), each label kept under the plot."""
        (low, high), metrics, line = self._ranges()[0], self.fontMetrics(), self.fontMetrics().height()
        for factor in (4, 16, 64, 256):
            placed, tokens = [], low
            while tokens <= high:
                text = short_tokens(tokens)
                label_width = metrics.horizontalAdvance(text) + 4
                x = min(max(self.to_point(tokens, 0).x() - label_width / 2, plot.left()), plot.right() - label_width)
                placed.append((QRectF(x, plot.bottom() + 2, label_width, line), text))
                tokens *= factor
            if all(a.right() + PAD <= b.left() for (a, _), (b, _) in zip(placed, placed[1:])):
                return placed
        return placed[:1]

    def _size_key(self) -> tuple:
        return self.width(), self.height(), self.font().key()

    def plot_rect(self) -> QRectF:
        return self.layout().plot if self.model is not None else QRectF(self.rect())

    def _ranges(self) -> tuple[tuple[int, int], float]:
        """((fewest, most tokens), most bytes) the axes show."""
        return self._scale

    def to_point(self, tokens: float, n_bytes: float) -> QPointF:
        """Widget coordinates of ``tokens`` of context taking ``n_bytes`` (in the last layout's plot)."""
        (low, high), top = self._ranges()
        rect = self._plot if self._plot is not None and self._plot_key == self._size_key() else self.layout().plot
        x = rect.left() + math.log(tokens / low) / math.log(high / low) * rect.width()
        return QPointF(x, rect.bottom() - n_bytes / top * rect.height())

    def line_points(self, name: str) -> list[QPointF]:
        """The points ``name`` ("hybrid" or "transformer") is drawn through, left to right."""
        (low, high), _ = self._ranges()
        line = self.model.lines()[name]
        tokens = (low * (high / low) ** (i / (SAMPLES - 1)) for i in range(SAMPLES))
        return [self.to_point(n, line(round(n))) for n in tokens]

    def usable_point(self, name: str) -> QPointF | None:
        """Where the dot of the context ``name`` can use goes: on the budget where memory is the
        limit, else on the line at the trained length; None when not even 256 tokens fit."""
        tokens, held = self.model.usable()[name], self.model.crossings()[name]
        if tokens is None:
            return None
        if held > tokens:
            return self.to_point(tokens, self.model.lines()[name](tokens))
        return self.to_point(min(tokens, self._ranges()[0][1]), self.model.budget_bytes)

    def headroom_point(self, name: str) -> QPointF | None:
        """Where the ring goes: the line meets the budget past the trained length (None: no headroom)."""
        tokens, held = self.model.usable()[name], self.model.crossings()[name]
        if tokens is None or held <= tokens:
            return None
        return self.to_point(min(held, self._ranges()[0][1]), self.model.budget_bytes)

    # --------------------------------------------------------------------------- painting

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.model is None:
            painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, EMPTY_TEXT)
        else:
            layout = self.layout()
            self._paint_axes(painter, layout)
            self._paint_lines(painter)
            self._paint_marks(painter)
            self._paint_legend(painter, layout)
        painter.end()

    def _colour(self, role: QPalette.ColorRole) -> QColor:
        return self.palette().color(role)

    def _level_pens(self) -> dict[str, tuple[int, QPen]]:
        secondary = self._colour(QPalette.ColorRole.PlaceholderText)
        return {"free": (self.model.available_bytes, QPen(secondary, 1, Qt.PenStyle.DashLine)),
                "budget": (self.model.budget_bytes, QPen(secondary, 1, Qt.PenStyle.SolidLine))}

    def _paint_axes(self, painter: QPainter, layout: ChartLayout) -> None:
        """The grid, the tick labels and the axis title, the trained length and the memory levels."""
        rect, ((low, _), top) = layout.plot, self._ranges()
        grid, text = self._colour(QPalette.ColorRole.Mid), self._colour(QPalette.ColorRole.Text)
        painter.setPen(QPen(grid, 0.5))
        for value, _ in self._y_ticks(rect.height()):
            y = self.to_point(low, value).y()
            painter.drawLine(QPointF(rect.left(), y), QPointF(rect.right(), y))
        painter.drawRect(rect)
        painter.setPen(text)
        for box, label in layout.ticks:
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter if box.top() > rect.bottom() else
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)
        painter.drawText(layout.title, Qt.AlignmentFlag.AlignHCenter | Qt.TextFlag.TextWordWrap, AXIS_TITLE)
        trained_x = self.to_point(self.model.trained_tokens, 0).x()
        if rect.left() <= trained_x <= rect.right():
            painter.setPen(QPen(text, 1, Qt.PenStyle.DotLine))
            painter.drawLine(QPointF(trained_x, rect.top()), QPointF(trained_x, rect.bottom()))
        for n_bytes, pen in self._level_pens().values():
            y = self.to_point(low, n_bytes).y()
            painter.setPen(pen)
            painter.drawLine(QPointF(rect.left(), y), QPointF(rect.right(), y))

    def _line_pens(self) -> dict[str, QPen]:
        return {"hybrid": QPen(self._colour(QPalette.ColorRole.Highlight), 2.2),
                "transformer": QPen(self._colour(QPalette.ColorRole.Text), 1.6, Qt.PenStyle.DashLine)}

    def _paint_lines(self, painter: QPainter) -> None:
        """Each line solid up to the trained length, dotted past it, clipped to the plot."""
        rect, pens = self.plot_rect(), self._line_pens()
        trained_x = min(max(self.to_point(self.model.trained_tokens, 0).x(), rect.left()), rect.right())
        trained = QRectF(rect.left(), rect.top(), trained_x - rect.left(), rect.height())
        beyond = QRectF(trained_x, rect.top(), rect.right() - trained_x, rect.height())
        for name in self.model.lines():
            points = QPolygonF(self.line_points(name))
            for clip, pen in ((trained, pens[name]), (beyond, QPen(pens[name].color(), 1, Qt.PenStyle.DotLine))):
                painter.save()
                painter.setClipRect(clip)
                painter.setPen(pen)
                painter.drawPolyline(points)
                painter.restore()

    def _paint_marks(self, painter: QPainter) -> None:
        """Per line, a dot at the context it can use and a ring where memory would hold more."""
        for name, pen in self._line_pens().items():
            if name not in self.model.lines():
                continue
            ring, dot = self.headroom_point(name), self.usable_point(name)
            if ring is not None:
                self._mark(painter, ring, pen.color(), filled=False)
            if dot is not None:
                self._mark(painter, dot, pen.color(), filled=True)
        painter.setBrush(Qt.BrushStyle.NoBrush)

    @staticmethod
    def _mark(painter: QPainter, point: QPointF, colour: QColor, filled: bool) -> None:
        painter.setPen(Qt.PenStyle.NoPen if filled else QPen(colour, 1.5))
        painter.setBrush(colour if filled else Qt.BrushStyle.NoBrush)
        painter.drawEllipse(point, 4, 4)

    def _paint_legend(self, painter: QPainter, layout: ChartLayout) -> None:
        pens, levels = self._line_pens(), self._level_pens()
        for entry in layout.legend:
            mark, middle = entry.mark, entry.mark.center()
            if entry.kind in ("line", "dashed"):
                painter.setPen(pens["hybrid" if entry.kind == "line" else "transformer"])
                painter.drawLine(QPointF(mark.left(), middle.y()), QPointF(mark.right(), middle.y()))
            elif entry.kind in ("dot", "ring"):
                self._mark(painter, middle, entry.colour, filled=entry.kind == "dot")
                painter.setBrush(Qt.BrushStyle.NoBrush)
            elif entry.kind == "trained":
                painter.setPen(QPen(entry.colour, 1, Qt.PenStyle.DotLine))
                painter.drawLine(QPointF(middle.x(), mark.top()), QPointF(middle.x(), mark.bottom()))
            else:
                painter.setPen(levels[entry.kind][1])
                painter.drawLine(QPointF(mark.left(), middle.y()), QPointF(mark.right(), middle.y()))
            painter.setPen(self._colour(QPalette.ColorRole.Text))
            painter.drawText(entry.box, Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap, entry.text)


def _scale(model: ChartModel) -> tuple[tuple[int, int], float]:
    """The axes' ranges for ``model``: see the module's docstring."""
    x_range = token_range(model.trained_tokens, list(model.crossings().values()))
    return x_range, max(model.available_bytes, model.hybrid(CONTEXT_STEP)) * HEADROOM
