"""Telemetry from the real worker: present, plausible, and honest about missing sensors."""

from pathlib import Path

import psutil
import pytest

from engine import protocol as p
from tests.process.conftest import collect, finished, generate, wait_for

pytestmark = pytest.mark.process


def machine_has_cpu_temperature() -> bool:
    sensors = getattr(psutil, "sensors_temperatures", lambda: {})() or {}
    if any(reading.current and reading.current > 0 for group in sensors.values() for reading in group):
        return True
    return any(Path("/sys/class/thermal").glob("thermal_zone*/temp"))


def telemetry_after(worker, command) -> tuple[p.Finished, p.Telemetry]:
    """The request's end and a sample measured after it: the first sample to arrive after Finished
    may have been measured before it (the sampler thread measures, then sends), the second cannot."""
    end = finished(collect(worker, command))
    wait_for(worker, p.Telemetry, timeout=10)
    return end, wait_for(worker, p.Telemetry, timeout=10)


def test_values_are_present_and_plausible(worker, hybrid_tiny):
    worker.send(p.SetTelemetry(interval_ms=100))
    loaded = worker.load_model(str(hybrid_tiny))
    _, sample = telemetry_after(worker, generate(max_tokens=8))
    assert sample.model_bytes == loaded.facts.size_bytes > 0
    assert sample.rss_bytes > sample.model_bytes
    assert 0 < sample.available_bytes < psutil.virtual_memory().total
    assert sample.ttft_ms != p.UNAVAILABLE and sample.ttft_ms > 0
    assert sample.phase_devices == {"prefill": "cpu", "decode": "cpu"}
    if machine_has_cpu_temperature():
        assert isinstance(sample.cpu_temp_c, float) and 0 < sample.cpu_temp_c < 150
    else:
        assert sample.cpu_temp_c == p.UNAVAILABLE
    freq = psutil.cpu_freq()
    if freq is None or not freq.max:
        assert sample.cpu_freq_max_mhz == p.UNAVAILABLE


def test_recurrent_state_is_fixed_while_attention_kv_grows(worker, hybrid_tiny):
    worker.send(p.SetTelemetry(interval_ms=100))
    worker.load_model(str(hybrid_tiny))
    sizes = []
    for words, n in ((5, 10), (60, 40), (300, 200)):
        end, sample = telemetry_after(worker, generate("lorem ipsum " * words, max_tokens=n))
        sizes.append((end.timings.prompt_n + end.timings.gen_n, sample.state_fixed_bytes, sample.state_kv_bytes))
    tokens, fixed, kv = zip(*sizes)
    assert tokens[0] < tokens[1] < tokens[2]
    assert fixed[0] == fixed[1] == fixed[2] > 0
    assert kv[0] < kv[1] < kv[2]
    per_token = [k / t for k, t in zip(kv, tokens)]
    assert max(per_token) / min(per_token) < 1.2  # KV grows in proportion to the tokens held


def test_live_rates_during_a_long_generation(worker):
    worker.send(p.SetTelemetry(interval_ms=100))
    worker.load_model("default")
    command = generate("The river flows past the old mill. " * 40, max_tokens=120)
    worker.send(command)
    samples = []
    while not isinstance(event := worker.next_event(60), p.Finished):
        assert event is not None
        if isinstance(event, p.Telemetry):
            samples.append(event)
    assert any(s.prefill_tok_s > 0 for s in samples), "a prefill rate while reading"
    assert any(s.decode_tok_s > 0 for s in samples), "a decode rate while writing"


def test_a_new_model_starts_without_the_last_models_answer_figures(worker, hybrid_tiny, smollm2):
    """Issue 51: after switching models, telemetry kept the old model's time to first token."""
    worker.send(p.SetTelemetry(interval_ms=100))
    worker.load_model(str(hybrid_tiny))
    _, sample = telemetry_after(worker, generate(max_tokens=4))
    assert sample.ttft_ms != p.UNAVAILABLE
    worker.load_model(str(smollm2))
    wait_for(worker, p.Telemetry, timeout=10)
    sample = wait_for(worker, p.Telemetry, timeout=10)
    assert sample.ttft_ms == p.UNAVAILABLE and sample.draft_acceptance == p.UNAVAILABLE
