"""Prefill progress between chunks: estimates while a long chunk is read, never past it, never back."""

import time

from engine.decoding.progress import PrefillProgress


def test_a_long_chunk_sends_estimates_then_the_exact_count():
    reports = []
    progress = PrefillProgress(lambda *args: reports.append(args), heartbeat_s=0.05)
    try:
        progress.chunk_started(0, 100, 1000)
        time.sleep(0.2)
        progress.chunk_done(100, 1000)  # about 500 tokens/s
        progress.chunk_started(100, 400, 1000)
        time.sleep(0.4)  # a slow chunk: estimates must arrive meanwhile
        progress.chunk_done(500, 1000)
    finally:
        progress.close()
    exact = [r[0] for r in reports if not r[3]]
    assert exact == [100, 500]
    first_done = next(i for i, r in enumerate(reports) if not r[3])
    estimates = [r[0] for r in reports[first_done:] if r[3]]  # during the second chunk, whose speed is known
    assert len(estimates) >= 3, reports
    assert all(100 < e <= 499 for e in estimates), "an estimate stays inside the chunk being read"
    counts = [r[0] for r in reports]
    assert counts == sorted(counts), "progress never goes back"
    assert all(r[1] == 1000 for r in reports)


def test_before_a_speed_is_known_heartbeats_repeat_the_count_and_none_come_between_chunks():
    reports = []
    progress = PrefillProgress(lambda *args: reports.append(args), heartbeat_s=0.05)
    try:
        progress.chunk_started(0, 500, 500)
        time.sleep(0.2)  # the first chunk: no speed measured yet, so the count stays at 0
        progress.chunk_done(500, 500)
        time.sleep(0.2)  # between chunks: nothing to say
    finally:
        progress.close()
    heartbeats = [r for r in reports if r[3]]
    assert len(heartbeats) >= 2 and all(r[0] == 0 for r in heartbeats), reports
    assert [r[2] for r in heartbeats] == sorted(r[2] for r in heartbeats), "elapsed time moves on"
    assert reports[-1][:2] == (500, 500) and not reports[-1][3]


def test_a_chunk_slower_than_the_last_still_hears_a_heartbeat_every_interval():
    """The estimate stops at the chunk's end; the heartbeats do not (the read is still alive)."""
    reports, arrivals = [], []
    progress = PrefillProgress(lambda *args: (reports.append(args), arrivals.append(time.perf_counter())),
                               heartbeat_s=0.05)
    try:
        progress.chunk_started(0, 100, 1000)
        time.sleep(0.05)
        progress.chunk_done(100, 1000)  # about 2,000 tokens/s: the estimate reaches 199 within 0.05 s
        progress.chunk_started(100, 100, 1000)
        time.sleep(0.6)
        progress.chunk_done(200, 1000)
    finally:
        progress.close()
    during = [r[0] for r in reports if r[3]]
    assert during and max(during) == 199 and during == sorted(during)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert max(gaps) < 0.15, gaps  # 0.05 s heartbeats, woken every 0.025 s; generous for a busy machine
