"""The text formatters: units, unit boundaries, and the "unavailable" / missing conventions."""

import math

import pytest

from ui.formatting import (
    NO_STATISTICS,
    NO_VALUE,
    UNAVAILABLE_TEXT,
    fmt_bytes,
    fmt_device,
    fmt_fraction,
    fmt_ms,
    fmt_rate,
    fmt_temperature,
    fmt_throttle,
    message_stats_tooltip,
)

ALL_SINGLE_VALUE_FORMATTERS = [fmt_rate, fmt_bytes, fmt_ms, fmt_fraction, fmt_temperature]


@pytest.mark.parametrize("formatter", ALL_SINGLE_VALUE_FORMATTERS)
def test_unavailable_reads_unavailable_and_missing_reads_dash(formatter):
    assert formatter("unavailable") == UNAVAILABLE_TEXT == "unavailable"
    assert formatter(None) == NO_VALUE == "\u2014"
    assert formatter(math.nan) == UNAVAILABLE_TEXT


@pytest.mark.parametrize(
    ("tok_s", "text"),
    [(0, "idle"), (0.0, "idle"), (12.34, "12.3 tok/s"), (0.25, "0.2 tok/s"), (99.94, "99.9 tok/s"),
     (99.96, "100 tok/s"), (1234.4, "1,234 tok/s")],
)
def test_fmt_rate(tok_s, text):
    assert fmt_rate(tok_s) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (812 * 1024, "812 KiB"),
        (1024 * 1024 - 1, "1.0 MiB"),  # would round to "1024 KiB": promoted
        (int(4.9 * 1024**2), "4.9 MiB"),
        (1024**3 - 1, "1.00 GiB"),
        (int(1.2 * 1024**3), "1.20 GiB"),
        (2048 * 1024**3, "2,048.00 GiB"),
        (-2048, "-2 KiB"),
    ],
)
def test_fmt_bytes_uses_labelled_binary_units(n, text):
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0 ms"), (85.4, "85 ms"), (999.4, "999 ms"), (999.6, "1.0 s"), (1400, "1.4 s"),
     (59_940, "59.9 s"), (59_960, "1 min 0 s"), (125_000, "2 min 5 s"), (-5, "0 ms")],
)
def test_fmt_ms(ms, text):
    assert fmt_ms(ms) == text


@pytest.mark.parametrize(("x", "text"), [(0.0, "0%"), (0.734, "73%"), (0.736, "74%"), (1.0, "100%")])
def test_fmt_fraction(x, text):
    assert fmt_fraction(x) == text


def test_fmt_temperature():
    assert fmt_temperature(61.4) == "61 \u00b0C"
    assert fmt_temperature(0) == "0 \u00b0C"


def test_fmt_throttle():
    assert fmt_throttle(True, 1200.0, 3400.0) == "throttled (1.2 of 3.4 GHz)"
    assert fmt_throttle(True, 1200.0, "unavailable") == "throttled (1.2 GHz)"
    assert fmt_throttle(True, "unavailable", "unavailable") == "throttled"
    assert fmt_throttle(False, 3400.0, 3400.0) == "not throttled"
    assert fmt_throttle("unavailable", 1200.0, 3400.0) == "unavailable"
    assert fmt_throttle(None) == NO_VALUE


def test_fmt_device_prefers_the_device_that_ran():
    assert fmt_device("npu", "cpu") == "cpu (planned: npu)"
    assert fmt_device("cpu", "cpu") == "cpu"
    assert fmt_device("npu", None) == "npu"
    assert fmt_device(None, "cpu") == "cpu"
    assert fmt_device(None, None) == NO_VALUE


FULL_STATS = {
    "elapsed_s": 3.2,
    "timings": {"prompt_n": 35, "prompt_ms": 200.0, "gen_n": 42, "gen_ms": 2270.27, "ttft_ms": 120.0},
    "snapshot": {"restored": True, "restored_tokens": 1024, "prefilled_tokens": 35, "saved_bytes": 5_000_000},
    "draft": {"kind": "lookup", "rounds": 12, "drafted": 40, "accepted": 30, "auto_off": False, "reason": ""},
}


def test_tooltip_with_full_stats_has_one_line_per_fact_in_order():
    assert message_stats_tooltip(FULL_STATS).splitlines() == [
        "42 tokens \u00b7 18.5 tok/s",
        "first word after 120 ms",
        "read 35 new tokens (1,024 resumed from where they were saved, not read again)",
        "guesses ahead: 30 of 40 kept (75%)",
        "took 3.2 s in all",
    ]


def test_tooltip_for_an_interrupted_answer_shows_only_what_is_known():
    stats = {"timings": {"gen_n": 1, "gen_ms": 0.0}}
    assert message_stats_tooltip(stats) == "1 token"


def test_tooltip_without_snapshot_uses_prompt_timings_and_ignores_unrestored_snapshots():
    assert message_stats_tooltip({"timings": {"prompt_n": 1200}}) == "read 1,200 new tokens"
    stats = {"snapshot": {"restored": False, "restored_tokens": 500, "prefilled_tokens": 80}}
    assert message_stats_tooltip(stats) == "read 80 new tokens"


def test_tooltip_says_why_drafting_was_switched_off():
    stats = {"draft": {"kind": "mtp", "drafted": 8, "accepted": 2, "auto_off": True, "reason": "slower than plain decoding"}}
    assert message_stats_tooltip(stats).splitlines() == [
        "guesses ahead: 2 of 8 kept (25%)",
        "guessing ahead off: slower than plain decoding",
    ]


def test_the_engines_measured_reason_reads_in_words_with_its_numbers():
    """Issue 51: "drafting off: drafting measured 15.0 tok/s against 20.4 tok/s without; switched off"."""
    stats = {"draft": {"kind": "eagle3", "auto_off": True,
                       "reason": "drafting measured 15.0 tok/s against 20.4 tok/s without; switched off"}}
    assert message_stats_tooltip(stats) == \
        "guessing ahead off: it was slower on this computer (15.0 tok/s with it, 20.4 without)"


def test_tooltip_ignores_values_of_the_wrong_type():
    stats = {"timings": "broken", "snapshot": {"prefilled_tokens": "many"}, "draft": {"drafted": None}}
    assert message_stats_tooltip(stats) == NO_STATISTICS


@pytest.mark.parametrize("stats", [{}, None, {"unknown": 1}])
def test_tooltip_without_statistics(stats):
    assert message_stats_tooltip(stats) == "No statistics for this message."
