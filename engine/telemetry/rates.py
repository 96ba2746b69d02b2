"""Live token rates over a sliding window, filled by the engine loop and read by the sampler.

Each record is (when it ended, tokens, seconds spent). A rate is tokens divided by the time spent
in that phase within the window, so idle gaps between requests do not dilute it; with nothing in
the window the rate is 0 (idle), not the last value.
"""

from __future__ import annotations

import threading
import time
from collections import deque

PHASES = ("prefill", "decode")


class LiveRates:
    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._records = {phase: deque() for phase in PHASES}
        self._lock = threading.Lock()
        self.ttft_ms: float | None = None
        self.draft_acceptance: float | None = None  # accepted / drafted tokens of the latest request
        self.phase_devices: dict[str, str] = {}

    def forget_answers(self) -> None:
        """A new model: the last answer's time to first token and draft acceptance were another model's."""
        self.ttft_ms = self.draft_acceptance = None

    def record(self, phase: str, n_tokens: int, seconds: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            records = self._records[phase]
            records.append((now, n_tokens, seconds))
            self._drop_old(records, now)

    def rate(self, phase: str, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            records = self._records[phase]
            self._drop_old(records, now)
            tokens = sum(r[1] for r in records)
            seconds = sum(r[2] for r in records)
        return tokens / seconds if seconds > 0 else 0.0

    def _drop_old(self, records: deque, now: float) -> None:
        while records and records[0][0] < now - self.window_s:
            records.popleft()
