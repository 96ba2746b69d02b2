"""What other programs did with the CPU while a benchmark's request ran: the busy time of the cores
this process may use, less what the benchmark's own processes used, in cores (0: idle, 1: one core
kept busy). A contended turn shows in the numbers instead of hiding in a median."""

from __future__ import annotations

import time

import psutil

from engine.decoding.thread_budget import busy_cpu_seconds, own_cpu_seconds, usable_cores


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of these processes and all their children (a server's worker process included)."""
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue  # it ended: what it used is no longer counted on either side of the span
    return total


class OthersCpu:
    """``with OthersCpu(pids) as use: ...`` then ``use.cores``: other programs' average busy cores."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.cores_list = pids, usable_cores()
        self.cores = 0.0

    def _sample(self) -> tuple[float, float, float]:
        return (time.monotonic(), busy_cpu_seconds(self.cores_list),
                tree_cpu_seconds(self.pids) + own_cpu_seconds())

    def __enter__(self) -> OthersCpu:
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        elapsed = end[0] - self._start[0]
        others = (end[1] - self._start[1]) - (end[2] - self._start[2])
        self.cores = max(0.0, others / elapsed) if elapsed > 0 else 0.0
