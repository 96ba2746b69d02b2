import pytest

from engine.telemetry.rates import LiveRates


def test_rate_is_tokens_over_busy_time_in_the_window():
    rates = LiveRates(window_s=2.0)
    rates.record("decode", 10, 0.5, now=100.0)
    rates.record("decode", 10, 0.5, now=101.0)
    assert rates.rate("decode", now=101.5) == pytest.approx(20.0)
    assert rates.rate("prefill", now=101.5) == 0.0


def test_old_records_leave_the_window_and_idle_is_zero():
    rates = LiveRates(window_s=2.0)
    rates.record("prefill", 512, 1.0, now=100.0)
    rates.record("prefill", 256, 1.0, now=103.0)
    assert rates.rate("prefill", now=103.5) == pytest.approx(256.0)
    assert rates.rate("prefill", now=110.0) == 0.0
