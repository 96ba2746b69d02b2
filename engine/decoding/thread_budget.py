"""How many threads the next decode may use: every core, less those other programs are busy on now.

ggml's threads meet at a spinning barrier after every graph node, so a decode with more threads
than free cores waits at each node for a thread the system has put aside, many times slower than
fewer threads would be (docs/performance.md, "Measurements behind the design";
tests/bench/bench_contention.py). The count changes the speed only: ggml gives each thread whole
rows, so the numbers are the same (tests/engine/test_prefill_chunks.py).

"Now" is the last half second, not the time since the last decode: a watcher thread notes the CPU
counters every :attr:`ThreadBudget.SAMPLE_S`, and each decision compares the newest note with the
one at least :attr:`ThreadBudget.WINDOW_S` before it. A program that ran while Hearth was idle, and
has stopped, no longer costs the next prompt a core (an average over the whole idle gap read the
next prompt on one thread for seconds on an idle machine).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable

import psutil

Sample = tuple[float, float, float]  # (clock, busy CPU seconds of our cores, this process's CPU seconds)


class ThreadBudget:
    """Threads for the next decode: at most ``n_max``, and no more than the cores other programs leave
    free. What others use is the busy time of the cores this process may run on, less this process's
    own, over the last :attr:`WINDOW_S` or a little more; it is rounded to whole cores."""

    WINDOW_S = 0.5
    SAMPLE_S = 0.25  # how often the counters are noted, and how often the count may change

    def __init__(self, n_max: int, *, clock: Callable[[], float] = time.monotonic,
                 busy_seconds: Callable[[], float] | None = None,
                 own_seconds: Callable[[], float] | None = None, n_cores: int | None = None,
                 watch: bool = True) -> None:
        cores = usable_cores()
        self.n_max, self.n_cores = n_max, n_cores or len(cores)
        self.clock = clock
        self.own_seconds = own_seconds or own_cpu_seconds
        self.busy_seconds = busy_seconds or (lambda: busy_cpu_seconds(cores))
        self.threads = n_max  # nothing measured yet: every core
        self._samples: deque[Sample] = deque(maxlen=32)
        self._lock = threading.Lock()
        self._decided_at = float("-inf")
        self._stopped = threading.Event()
        self.note()
        if watch:
            threading.Thread(target=self._watch, name="thread-budget", daemon=True).start()

    def note(self) -> None:
        """Note the counters now (the watcher does this every :attr:`SAMPLE_S`)."""
        sample = (self.clock(), self.busy_seconds(), self.own_seconds())
        with self._lock:
            self._samples.append(sample)

    def _watch(self) -> None:
        while not self._stopped.wait(self.SAMPLE_S):
            self.note()

    def __call__(self) -> int:
        now = self.clock()
        if now - self._decided_at < self.SAMPLE_S:
            return self.threads
        self._decided_at = now  # asked again sooner, it keeps the count (and the older notes)
        if now - self._samples[-1][0] >= self.SAMPLE_S:
            self.note()
        with self._lock:
            latest = self._samples[-1]
            earlier = [s for s in self._samples if latest[0] - s[0] >= self.WINDOW_S]
        if not earlier:
            return self.threads  # not yet a window's worth of notes: keep the count
        then = earlier[-1]
        others = max(0.0, (latest[1] - then[1]) - (latest[2] - then[2])) / (latest[0] - then[0])
        self.threads = max(1, min(self.n_max, int(self.n_cores - others + 0.5)))
        return self.threads

    def close(self) -> None:
        """Stop the watcher (the session closes it with its context)."""
        self._stopped.set()


def usable_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(psutil.cpu_count() or 1))


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def busy_cpu_seconds(cores: list[int]) -> float:
    """Seconds the given cores spent on anything but idling (other virtual machines' steal included)."""
    per_core = psutil.cpu_times(percpu=True)
    total = 0.0
    for core in cores:
        if core < len(per_core):
            t = per_core[core]
            total += sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) \
                - getattr(t, "guest_nice", 0.0)  # guest time is counted in user time already
    return total
