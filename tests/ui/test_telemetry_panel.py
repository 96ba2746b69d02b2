"""The telemetry panel and its charts, as real widgets on the offscreen platform."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

from engine.protocol import UNAVAILABLE, DevicePlan, PhaseDevice, Telemetry
from ui.views.sparkline import Sparkline
from ui.views.usage_bar import UsageBar
from ui.views.telemetry_panel import VALUE_KEYS, TelemetryPanel

MIB = 1024**2
GIB = 1024**3
DASH = "\u2014"


def make_telemetry(**changes) -> Telemetry:
    fields = dict(
        t=1000.0,
        rss_bytes=int(1.5 * GIB),
        available_bytes=6 * GIB,
        model_bytes=int(1.2 * GIB),
        state_fixed_bytes=12 * MIB,
        state_kv_bytes=36 * MIB,
        cpu_temp_c=61.2,
        cpu_freq_mhz=3400.0,
        cpu_freq_max_mhz=3400.0,
        throttled=False,
        prefill_tok_s=250.0,
        decode_tok_s=18.54,
        ttft_ms=120.0,
        draft_acceptance=0.734,
        phase_devices={"prefill": "cpu", "decode": "cpu"},
        kv_allocated_bytes=512 * MIB,
    )
    fields.update(changes)
    return Telemetry(**fields)


PLAN = DevicePlan(
    prefill=PhaseDevice("npu", "the NPU reads long prompts fastest"),
    decode=PhaseDevice("cpu", "the CPU is the fastest device for writing"),
)


@pytest.fixture
def panel(qtbot) -> TelemetryPanel:
    widget = TelemetryPanel()
    qtbot.addWidget(widget)
    widget.resize(260, 520)
    return widget


def test_values_has_exactly_the_documented_keys_and_labels(panel):
    assert list(panel.values()) == [
        "prefill_rate", "decode_rate", "ttft", "draft_acceptance", "memory", "model_size",
        "state_fixed", "state_kv", "kv_cache", "cpu_temperature", "throttling", "prefill_device", "decode_device",
    ]
    for key in VALUE_KEYS:
        assert isinstance(panel.findChild(QLabel, f"telemetry_{key}"), QLabel), key
    assert panel.findChild(Sparkline, "sparkline_prefill") is panel.prefill_sparkline
    assert panel.findChild(Sparkline, "sparkline_decode") is panel.decode_sparkline


def test_a_new_panel_shows_no_values(panel):
    assert set(panel.values().values()) == {DASH}


def test_show_telemetry_updates_every_value(panel):
    panel.show_telemetry(make_telemetry())
    assert panel.values() == {
        "prefill_rate": "250 tok/s",
        "decode_rate": "18.5 tok/s",
        "ttft": "120 ms",
        "draft_acceptance": "73%",
        "memory": "1.50 GiB (6.00 GiB available)",
        "model_size": "1.20 GiB",
        "state_fixed": "12.0 MiB",
        "state_kv": "36.0 MiB",
        "kv_cache": "36.0 MiB of 512.0 MiB (7 %)",
        "cpu_temperature": "61 \u00b0C",
        "throttling": "not throttled",
        "prefill_device": "cpu",
        "decode_device": "cpu",
    }
    assert panel.findChild(QLabel, "telemetry_decode_rate").text() == "18.5 tok/s"
    assert panel.usage_bar.usage() == (36 * MIB, 512 * MIB)
    assert panel.usage_bar.fraction() == pytest.approx(36 / 512)


def test_the_kv_cache_row_shows_the_part_in_use_of_what_the_context_allocated(panel):
    panel.show_telemetry(make_telemetry(state_kv_bytes=384 * MIB, kv_allocated_bytes=512 * MIB))
    assert panel.values()["kv_cache"] == "384.0 MiB of 512.0 MiB (75 %)"
    assert panel.usage_bar.fraction() == pytest.approx(0.75)
    panel.show_telemetry(make_telemetry(state_kv_bytes=0, kv_allocated_bytes=0))  # no attention cache (or no model)
    assert panel.values()["kv_cache"] == DASH
    panel.clear()
    assert panel.values()["kv_cache"] == DASH


def test_idle_rates_read_idle(panel):
    panel.show_telemetry(make_telemetry(prefill_tok_s=0.0, decode_tok_s=0.0))
    assert panel.values()["prefill_rate"] == panel.values()["decode_rate"] == "idle"


def test_unavailable_measurements_read_unavailable(panel):
    panel.show_telemetry(make_telemetry(
        cpu_temp_c=UNAVAILABLE, cpu_freq_mhz=UNAVAILABLE, cpu_freq_max_mhz=UNAVAILABLE,
        throttled=UNAVAILABLE, ttft_ms=UNAVAILABLE, draft_acceptance=UNAVAILABLE,
    ))
    values = panel.values()
    for key in ("cpu_temperature", "throttling", "ttft", "draft_acceptance"):
        assert values[key] == "unavailable", key
    assert values["decode_rate"] == "18.5 tok/s"


def test_throttled_and_not_throttled(panel):
    label = panel.findChild(QLabel, "telemetry_throttling")
    panel.show_telemetry(make_telemetry(throttled=True, cpu_freq_mhz=1200.0, cpu_freq_max_mhz=3400.0))
    assert panel.values()["throttling"] == "throttled (1.2 of 3.4 GHz)"
    assert label.font().bold()
    panel.show_telemetry(make_telemetry(throttled=False))
    assert panel.values()["throttling"] == "not throttled"
    assert not label.font().bold()


def test_sparklines_grow_by_one_value_per_sample_up_to_capacity(panel):
    capacity = panel.decode_sparkline.capacity
    for i in range(capacity + 5):
        panel.show_telemetry(make_telemetry(prefill_tok_s=float(i), decode_tok_s=float(2 * i)))
        if i < 3:
            assert len(panel.prefill_sparkline.values()) == len(panel.decode_sparkline.values()) == i + 1
    assert panel.decode_sparkline.values() == [float(2 * i) for i in range(5, capacity + 5)]
    assert len(panel.prefill_sparkline.values()) == capacity


def test_sparkline_keeps_its_capacity_and_clears(qtbot):
    sparkline = Sparkline(capacity=3)
    qtbot.addWidget(sparkline)
    for value in (1.0, 2.0, 3.0, 4.0):
        sparkline.add(value)
    assert sparkline.values() == [2.0, 3.0, 4.0]
    sparkline.clear()
    assert sparkline.values() == []
    assert sparkline.accessibleName()
    with pytest.raises(ValueError):
        Sparkline(capacity=1)


def test_device_plan_then_the_device_that_ran_overrides_it(panel):
    panel.show_device_plan(PLAN)
    assert panel.values()["prefill_device"] == "npu"
    assert panel.values()["decode_device"] == "cpu"
    reason = panel.findChild(QLabel, "telemetry_prefill_device_reason")
    assert reason.text() == "the NPU reads long prompts fastest"
    assert reason.wordWrap()
    assert panel.findChild(QLabel, "telemetry_prefill_device").toolTip() == reason.text()

    panel.show_telemetry(make_telemetry(phase_devices={"prefill": "cpu"}))
    assert panel.values()["prefill_device"] == "cpu (planned: npu)"
    assert panel.values()["decode_device"] == "cpu"

    panel.show_telemetry(make_telemetry(phase_devices={"prefill": "npu", "decode": "cpu"}))
    assert panel.values()["prefill_device"] == "npu"


def test_show_model_names_the_model_and_its_size(panel):
    panel.show_model("SmolLM2 135M Instruct", 270 * MIB)
    assert panel.values()["model_size"] == "270.0 MiB"
    assert panel.model_name_label.text() == "SmolLM2 135M Instruct"


def test_a_sample_without_a_model_size_keeps_the_last_known_size(panel):
    panel.show_model("SmolLM2 135M Instruct", 270 * MIB)
    panel.show_telemetry(make_telemetry(model_bytes=0))
    assert panel.values()["model_size"] == "270.0 MiB"
    panel.show_telemetry(make_telemetry(model_bytes=int(1.2 * GIB)))
    panel.show_telemetry(make_telemetry(model_bytes=0))
    assert panel.values()["model_size"] == "1.20 GiB"


def test_clear_resets_values_charts_and_devices(panel):
    panel.show_model("tiny", GIB)
    panel.show_device_plan(PLAN)
    panel.show_telemetry(make_telemetry(throttled=True))
    panel.clear()
    assert panel.values() == {key: DASH for key in VALUE_KEYS}
    assert panel.prefill_sparkline.values() == panel.decode_sparkline.values() == []
    assert panel.usage_bar.usage() == (0, 0)
    assert panel.findChild(QLabel, "telemetry_prefill_device_reason").text() == ""
    assert panel.model_name_label.text() == "No model loaded"
    assert not panel.findChild(QLabel, "telemetry_throttling").font().bold()


def test_panel_renders(panel):
    panel.show_device_plan(PLAN)
    panel.show_telemetry(make_telemetry())
    pixmap = panel.grab()
    assert not pixmap.isNull()
    assert pixmap.width() > 0 and pixmap.height() > 0


def test_a_sparkline_with_values_draws_something(qtbot):
    empty, filled = Sparkline(), Sparkline()
    for sparkline in (empty, filled):
        qtbot.addWidget(sparkline)
        sparkline.resize(sparkline.sizeHint())
    for value in (1.0, 5.0, 2.0, 8.0):
        filled.add(value)
    empty_image, filled_image = empty.grab().toImage(), filled.grab().toImage()
    assert empty_image.size() == filled_image.size()
    assert empty_image != filled_image
    filled.clear()
    assert filled.grab().toImage() == empty_image


def test_the_usage_bar_fills_as_the_conversation_uses_its_memory(qtbot):
    """Issue 51: the bar under "Memory this conversation uses" looked full at 0 %, 1 %, 2 % and 42 %
    (it drew the fixed/growing split, unlabelled). It is empty at 0 % and fills with the row's share."""
    bars = {share: UsageBar() for share in (0, 1, 42, 100)}
    images = {}
    for share, bar in bars.items():
        qtbot.addWidget(bar)
        bar.resize(200, 10)
        bar.set_usage(share * MIB, 100 * MIB)
        images[share] = bar.grab().toImage()
    empty = UsageBar()
    qtbot.addWidget(empty)
    empty.resize(200, 10)
    assert images[0] == empty.grab().toImage(), "0 % in use draws an empty track"
    highlight = bars[42].palette().color(bars[42].palette().ColorRole.Highlight).rgb()
    filled = {share: sum(image.pixel(x, 5) == highlight for x in range(200)) for share, image in images.items()}
    assert filled[0] == 0 and 0 < filled[1] < filled[42] < filled[100]
    assert 70 <= filled[42] <= 95 and filled[100] >= 190
    assert "42% of the memory set aside" in bars[42].accessibleDescription()


def test_row_titles_are_plain_words_with_the_technical_term_as_tooltip(panel):
    titles = {label.text(): label.toolTip() for label in panel.findChildren(QLabel) if label.toolTip()}
    assert "Memory this conversation uses" in titles and "KV cache" in titles["Memory this conversation uses"]
    assert "Reading speed" in titles and "Prefill" in titles["Reading speed"]
    shown = " ".join(label.text() for label in panel.findChildren(QLabel))
    for jargon in ("KV", "Prefill", "Decode", "recurrent", "attention"):
        assert jargon not in shown, f"{jargon!r} shown in the panel"


def test_a_phase_that_runs_without_a_rate_in_the_window_is_not_idle(panel):
    """On a busy machine no token may finish within the worker's rate window while it writes."""
    panel.show_telemetry(make_telemetry(prefill_tok_s=0.0, decode_tok_s=0.0, phase="decode"))
    assert panel.values()["decode_rate"] == "writing…"
    assert panel.values()["prefill_rate"] == "idle", "the other phase is not running"
    panel.show_telemetry(make_telemetry(prefill_tok_s=0.0, decode_tok_s=0.0, phase="prefill"))
    assert panel.values()["prefill_rate"] == "reading…" and panel.values()["decode_rate"] == "idle"
    panel.show_telemetry(make_telemetry(prefill_tok_s=0.0, decode_tok_s=0.0, phase="idle"))
    assert panel.values()["prefill_rate"] == panel.values()["decode_rate"] == "idle"
