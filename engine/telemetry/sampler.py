"""A background thread that sends a ``Telemetry`` event at a fixed interval.

It reads only plain numbers that the engine loop keeps up to date (:class:`engine.requests.core.LiveState`)
plus the machine's readings, so it keeps reporting during a long prefill without ever touching
llama.cpp from a second thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from engine import protocol as p
from engine.telemetry.system import SystemSampler


class TelemetryThread:
    def __init__(self, live, emit: Callable[[p.Event], None], interval_ms: int = 1000) -> None:
        self.live = live
        self.emit = emit
        self.system = SystemSampler()
        self._interval_s = interval_ms / 1000
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def set_interval(self, interval_ms: int) -> None:
        self._interval_s = max(0, interval_ms) / 1000
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop, and return once no event can come from the thread any more: the worker closes its
        protocol stream after this, and a sample emitted into a closed stream printed a traceback."""
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stopped:
            interval = self._interval_s
            if interval > 0:
                self.emit(self.sample())
            self._wake.wait(interval if interval > 0 else None)
            self._wake.clear()

    def sample(self) -> p.Telemetry:
        live, system = self.live, self.system.read()
        rates = live.rates
        return p.Telemetry(
            t=time.time(),
            rss_bytes=system.rss_bytes,
            available_bytes=system.available_bytes,
            model_bytes=live.model_bytes,
            state_fixed_bytes=live.state_fixed_bytes,
            state_kv_bytes=live.state_kv_bytes,
            kv_allocated_bytes=live.kv_allocated_bytes,
            cpu_temp_c=system.cpu_temp_c,
            cpu_freq_mhz=system.cpu_freq_mhz,
            cpu_freq_max_mhz=system.cpu_freq_max_mhz,
            throttled=system.throttled,
            prefill_tok_s=rates.rate("prefill"),
            decode_tok_s=rates.rate("decode"),
            ttft_ms=p.UNAVAILABLE if rates.ttft_ms is None else rates.ttft_ms,
            draft_acceptance=p.UNAVAILABLE if rates.draft_acceptance is None else rates.draft_acceptance,
            phase_devices=dict(rates.phase_devices),
            phase=live.phase,
        )
