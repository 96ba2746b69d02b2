"""Prefill progress between chunks: estimates while a long chunk is read, never past it, never back."""

import time

from engine.progress import PrefillProgress


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
    estimates = [r[0] for r in reports if r[3]]
    exact = [r[0] for r in reports if not r[3]]
    assert exact == [100, 500]
    assert len(estimates) >= 3, reports
    assert all(100 < e <= 499 for e in estimates), "an estimate stays inside the chunk being read"
    counts = [r[0] for r in reports]
    assert counts == sorted(counts), "progress never goes back"
    assert all(r[1] == 1000 for r in reports)


def test_no_estimates_between_chunks_or_before_a_speed_is_known():
    reports = []
    progress = PrefillProgress(lambda *args: reports.append(args), heartbeat_s=0.05)
    try:
        progress.chunk_started(0, 500, 500)
        time.sleep(0.2)  # the first chunk: no speed measured yet, so nothing to estimate from
        progress.chunk_done(500, 500)
        time.sleep(0.2)  # between chunks: nothing to estimate
    finally:
        progress.close()
    assert [r[0] for r in reports] == [500] and not reports[0][3]
