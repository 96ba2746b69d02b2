"""The Models page's chart of memory against context: its crossing points, its scales, and the
widget painting offscreen at several sizes."""

from __future__ import annotations

import functools

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont, QPalette

from model_store.catalogue import load_catalogue
from model_store.catalogue_schema import CatalogueEntry, CatalogueFile, StateShape
from model_store.installed import embedded_model_file
from model_store.fit import CONTEXT_STEP, LONGEST_CONTEXT, context_here
from ui.formatting import fmt_bytes
from ui.views.context_chart import EMPTY_TEXT, ChartModel, ContextChart, crossing, gib_step, short_tokens, token_range

GIB = 1024**3
AVAILABLE = 8 * GIB


def linear(fixed: int, per_token: int):
    return lambda n_ctx: fixed + per_token * n_ctx


def test_a_line_crosses_a_level_at_the_longest_context_within_it():
    line = linear(1_000_000, 1000)
    assert crossing(line, 1_000_000 + 1000 * 5120) == 5120, "exactly on the level"
    assert crossing(line, 1_000_000 + 1000 * 5375) == 5120, "rounded down to llama.cpp's step of 256"
    assert crossing(line, 1_000_000 + 1000 * 5376) == 5376
    assert crossing(line, 1_000_000 + 1000 * 255) is None, "not even 256 tokens fit"
    assert crossing(linear(0, 1), 10**12) == LONGEST_CONTEXT, "a line that stays under the level stops at the cap"
    assert crossing(line, 1_000_000 + 1000 * 9000, cap=4096) == 4096


def test_the_axes_span_past_the_trained_length_and_every_crossing():
    assert token_range(8192, [None, 2048]) == (256, 16384)
    assert token_range(262_144, [1_244_672, 311_552]) == (256, 2**21)
    assert token_range(2**23, [LONGEST_CONTEXT]) == (256, LONGEST_CONTEXT)
    assert [short_tokens(n) for n in (256, 1024, 65536, 262_144, 2**20, 2**24)] == ["256", "1k", "64k", "256k", "1M",
                                                                                     "16M"]
    assert gib_step(9.2 * GIB) == 2 and gib_step(1.1 * GIB) == 0.25 and gib_step(30 * GIB) == 8


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def chart_model(catalogue, model_id: str) -> ChartModel:
    entry = catalogue.get(model_id)
    return ChartModel.of(entry, entry.file().size_bytes, AVAILABLE, 70)


def test_the_crossings_are_the_listings_memory_figures_and_the_dots_its_context(catalogue):
    entry = catalogue.get("qwen3.5-2b")
    model = chart_model(catalogue, "qwen3.5-2b")
    here, transformer_here = context_here(entry, entry.file().size_bytes, AVAILABLE, 70)
    hybrid, transformer = here.memory_tokens, transformer_here.memory_tokens
    assert model.crossings() == {"hybrid": hybrid, "transformer": transformer}
    assert model.usable() == {"hybrid": here.tokens, "transformer": transformer_here.tokens}
    assert hybrid > 3 * transformer > 0, "one layer in four keeps a KV cache"
    assert model.budget_bytes == AVAILABLE * 70 // 100
    assert f"can use {here.tokens:,} tokens" in model.description() and f"{transformer:,}" in model.description()


def test_past_the_trained_length_memory_is_headroom_not_context(catalogue, qtbot):
    entry = catalogue.get("qwen3.5-0.8b")
    model = ChartModel.of(entry, entry.file().size_bytes, 24 * GIB, 70)  # the case: 1.29M on 24 GiB
    held = model.crossings()
    assert held["hybrid"] > 1_000_000 and held["transformer"] > 262_144 == model.trained_tokens
    assert model.usable() == {"hybrid": 262_144, "transformer": 262_144}
    assert model.description() == (
        f"Within a budget of {fmt_bytes(24 * GIB * 70 // 100)}, {entry.name} can use 262,144 tokens, its trained "
        f"maximum (memory would hold {held['hybrid']:,}); a transformer of equal size 262,144 tokens, its trained "
        f"maximum (memory would hold {held['transformer']:,}). It was trained on up to 262,144 tokens.")
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.show_model(model)
    chart.resize(600, chart.heightForWidth(600))
    trained_x = chart.to_point(262_144, 0).x()
    for name in ("hybrid", "transformer"):
        dot = chart.usable_point(name)
        assert dot.x() == trained_x, "the context it can use stops at the trained length"
        assert dot.y() > chart.to_point(CONTEXT_STEP, model.budget_bytes).y(), "under the budget: memory to spare"
        assert chart.to_point(held[name], 0).x() > trained_x, "where memory runs out is past it, as headroom"
    image = chart.grab().toImage()
    assert image.pixelColor(chart.usable_point("hybrid").toPoint()) == chart.palette().color(QPalette.ColorRole.Highlight)


def test_where_memory_is_the_limit_the_dot_is_on_the_budget(catalogue, qtbot):
    entry = catalogue.get("qwen3.5-2b")
    model = ChartModel.of(entry, entry.file().size_bytes, 4 * GIB, 70)
    held = model.crossings()
    assert model.usable() == held and held["hybrid"] < model.trained_tokens
    assert "trained maximum" not in model.description() and "memory would hold" not in model.description()
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.show_model(model)
    chart.resize(600, chart.heightForWidth(600))
    assert chart.usable_point("hybrid") == chart.to_point(held["hybrid"], model.budget_bytes)


def test_a_transformer_is_drawn_as_one_line(catalogue):
    model = chart_model(catalogue, "llama-3.2-1b-instruct")
    assert list(model.lines()) == ["hybrid"] and "transformer of equal size" not in model.description()


@pytest.fixture
def chart(qtbot, catalogue) -> ContextChart:
    widget = ContextChart()
    qtbot.addWidget(widget)
    widget.show_model(chart_model(catalogue, "qwen3.5-2b"))
    return widget


@pytest.mark.parametrize("width", [300, 560, 1100])
def test_the_chart_paints_at_any_width_with_a_dot_at_the_context_this_model_can_use(chart, width):
    size = (width, chart.heightForWidth(width))
    chart.resize(*size)
    image = chart.grab().toImage()
    assert (image.width(), image.height()) == size
    dot = chart.usable_point("hybrid").toPoint()
    assert image.pixelColor(dot) == chart.palette().color(QPalette.ColorRole.Highlight)
    assert chart.plot_rect().contains(dot)


def test_the_transformer_line_is_above_this_models_where_contexts_are_long(chart):
    chart.resize(600, chart.heightForWidth(600))
    hybrid, transformer = chart.line_points("hybrid"), chart.line_points("transformer")
    assert [p.x() for p in hybrid] == [p.x() for p in transformer]
    long_contexts = [i for i, point in enumerate(hybrid) if point.x() >= chart.to_point(4096, 0).x()]
    assert long_contexts and all(transformer[i].y() < hybrid[i].y() for i in long_contexts), "more memory is higher"
    budget_y = chart.to_point(CONTEXT_STEP, chart.model.budget_bytes).y()
    crossings = chart.model.crossings()
    assert chart.to_point(crossings["transformer"], 0).x() < chart.to_point(crossings["hybrid"], 0).x()
    assert chart.plot_rect().top() < budget_y < chart.plot_rect().bottom()


def test_an_empty_chart_paints_its_hint(qtbot):
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.resize(400, 200)
    chart.show_model(None)
    assert not chart.grab().isNull() and chart.accessibleDescription() == EMPTY_TEXT


# -- labels that never overlap (issue 51, point 7) ------------------------------------------------

@functools.cache
def smollm2_entry() -> CatalogueEntry:
    """The built-in SmolLM2 as a catalogue entry, its shape read from its own GGUF file."""
    from gguf import GGUFReader

    path = embedded_model_file()
    reader = GGUFReader(path)

    def value(key: str) -> int:
        field = reader.fields[f"llama.{key}"]
        return int(field.parts[field.data[0]][0])

    heads, kv_heads = value("attention.head_count"), value("attention.head_count_kv")
    return CatalogueEntry(
        id="smollm2", name="SmolLM2 135M Instruct", repo_id="HuggingFaceTB/SmolLM2-135M-Instruct", architecture="llama",
        context_length=value("context_length"), has_mtp=False, draft=None, licence="Apache-2.0", description="built in",
        recommended_quant="Q4_1", state=StateShape(value("block_count"), kv_heads, value("embedding_length") // heads),
        files=[CatalogueFile("Q4_1", path.name, path.stat().st_size)], source="its GGUF file")


def every_entry(catalogue) -> list[CatalogueEntry]:
    return [*catalogue, smollm2_entry()]


def overlaps(a: QRectF, b: QRectF) -> bool:
    return a.intersects(b) and not a.intersected(b).isEmpty()


@pytest.mark.parametrize("point_size", [9, 18])  # 100 % and 200 % text
@pytest.mark.parametrize("available", [2 * GIB, 8 * GIB, 64 * GIB])  # memory the limit; the trained length
@pytest.mark.parametrize("width", [380, 800])  # a card's chart in a narrow, the default and a wide page
def test_no_label_overlaps_another_or_a_line_or_leaves_the_chart(catalogue, qtbot, point_size, available, width):
    chart = ContextChart()
    qtbot.addWidget(chart)
    font = QFont(chart.font())
    font.setPointSize(point_size)
    chart.setFont(font)
    for entry in every_entry(catalogue):
        chart.show_model(ChartModel.of(entry, entry.file().size_bytes, available, 70))
        chart.resize(width, chart.heightForWidth(width))
        layout = chart.layout()
        rects = layout.label_rects()
        assert len(rects) >= 8
        inside = QRectF(chart.rect())
        plot = layout.plot
        assert plot.height() >= 100 and plot.width() >= 200, (entry.id, plot)
        for i, (rect, text) in enumerate(rects):
            assert inside.contains(rect), (entry.id, text, rect, inside)
            assert not overlaps(rect, plot), (entry.id, text, "over the plot")
            for other, other_text in rects[i + 1:]:
                assert not overlaps(rect, other), (entry.id, text, other_text)
        for name in chart.model.lines():
            drawn = [p for p in chart.line_points(name) if plot.contains(p)]
            assert drawn and not any(rect.contains(p) for rect, _ in rects for p in drawn)
        for entry_ in layout.legend:  # each text has the room it needs, wrapped if it must be
            needed = chart.fontMetrics().boundingRect(entry_.box.toRect(), 0x1000, entry_.text)  # Qt.TextWordWrap
            assert needed.height() <= entry_.box.height() + 1 and needed.width() <= entry_.box.width() + 1, entry_.text


def test_the_legend_says_each_figure_once(catalogue, qtbot):
    entry = catalogue.get("qwen3.5-0.8b")
    chart = ContextChart()
    qtbot.addWidget(chart)
    chart.show_model(ChartModel.of(entry, entry.file().size_bytes, 24 * GIB, 70))
    chart.resize(560, chart.heightForWidth(560))
    texts = [text for _, text in chart.layout().label_rects() if not text.startswith("sample of")]
    assert len(texts) == len(set(texts))
    assert sum("trained on up to 262,144" in text for text in texts) == 1, "the trained length is said once"
    assert sum("(more than it was trained for)" in text for text in texts) == 2, "a ring per line, each named"
