"""The worker says which phase it is in with every telemetry sample, so a rate of 0 (nothing finished
within its window, as on a busy machine) is never taken for idle while it reads or writes."""

import pytest

from engine import protocol as p
from tests.process.conftest import generate, wait_for

pytestmark = pytest.mark.process


def test_samples_name_the_phase_reading_then_writing_then_idle(worker, hybrid_tiny):
    worker.send(p.SetTelemetry(interval_ms=20))
    worker.load_model(str(hybrid_tiny))
    assert wait_for(worker, p.Telemetry).phase == "idle"
    worker.send(generate("The river flows past the old mill. " * 60, max_tokens=300))
    phases = []
    while not isinstance(event := worker.next_event(60), p.Finished):
        assert event is not None
        if isinstance(event, p.Telemetry):
            phases.append(event.phase)
        if isinstance(event, p.TokenDelta):
            phases.append("token")
    assert "decode" in phases, "a sample while the answer was written says so"
    before_first_token = phases[:phases.index("token")] if "token" in phases else phases
    assert "decode" not in before_first_token
    after = [wait_for(worker, p.Telemetry).phase for _ in range(5)]  # (the first may be sampled as it ended)
    assert after[-1] == "idle"
