"""Prefill progress as the app sees it: exact after each chunk, estimated in between.

A chunk is one ``llama_decode`` call and may take a second or more at a long context. So while a
chunk is being read, a timer thread sends an *estimated* count every :data:`HEARTBEAT_S` (never past
the chunk's end, never backwards); the exact count follows when the chunk is done. The estimate
comes from how far the model is through the chunk (``within``: the share of the batch's graph
computed, :meth:`engine.backends.llama_context.LlamaContext.decode_progress`), which moves from the
first chunk on; without it, from the speed of the chunk before. A heartbeat goes out even when the estimate cannot move (no speed known
yet, or the estimate already at the chunk's end because this chunk is slower than the last): it
repeats the count with the new elapsed time. So the app hears from a read at least every
:data:`HEARTBEAT_S`, progress bars keep moving and the ETA stays live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

HEARTBEAT_S = 0.5

Report = Callable[[int, int, float, bool], None]  # (processed, total, elapsed ms, estimated)


class PrefillProgress:
    def __init__(self, report: Report, heartbeat_s: float = HEARTBEAT_S,
                 within: Callable[[], float | None] | None = None) -> None:
        self.report = report
        self.heartbeat_s = heartbeat_s
        self.within = within or (lambda: None)  # the share of the running chunk computed, if known
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._chunk: tuple[int, int, int, float] | None = None  # (done, size, total, when it started)
        self._rate = 0.0  # tokens per second of the last chunk (the speed falls as the context grows)
        self._reported = 0
        self._last_report = self.started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="prefill-progress", daemon=True)
        self._thread.start()

    def chunk_started(self, done: int, size: int, total: int) -> None:
        with self._lock:
            self._chunk = (done, size, total, time.perf_counter())

    def chunk_done(self, processed: int, total: int) -> None:
        """Exact progress (called by the prefill loop after each chunk)."""
        now = time.perf_counter()
        with self._lock:
            if self._chunk is not None and now > self._chunk[3]:
                self._rate = self._chunk[1] / (now - self._chunk[3])
            self._chunk = None
            self._send(processed, total, now, estimated=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s / 2):
            now = time.perf_counter()
            with self._lock:
                if self._chunk is None or now - self._last_report < self.heartbeat_s:
                    continue
                done, size, total, since = self._chunk
                share = self.within()
                read = size * share if share is not None else self._rate * (now - since)
                estimate = done + min(size - 1, int(read))
                self._send(max(estimate, self._reported), total, now, estimated=True)

    def _send(self, processed: int, total: int, now: float, *, estimated: bool) -> None:
        self._reported, self._last_report = max(self._reported, processed), now
        self.report(processed, total, (now - self.started) * 1000, estimated)
