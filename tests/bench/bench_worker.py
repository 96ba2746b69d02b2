"""Decode speed seen through the subprocess client divided by the in-process client.

Both clients run the same model and request, alternating (A/B then B/A) in one run. Speed is what
the caller observes: tokens after the first delta divided by the time from the first delta to
``Finished``. Also reports the gaps between consecutive token-delta events as the GUI would see
them (the worst and the 99th percentile). Prints one JSON object.
Usage: ``python tests/bench/bench_worker.py [--reps N] [--model default]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine import protocol as p  # noqa: E402
from app.engine_clients.client import EngineClient, new_request_id  # noqa: E402
from app.engine_clients.inproc_client import InprocClient  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."


def observed_run(client: EngineClient, n_gen: int) -> tuple[float, list[float]]:
    """(decode tok/s as observed by the caller, gaps between token deltas in ms)"""
    command = p.Chat(request_id=new_request_id("bench"), messages=[p.WireMessage("user", PROMPT)], max_tokens=n_gen,
                     sampling=p.SamplingSpec(temperature=0), stop=[], draft=p.DraftSpec("off"))
    arrivals: list[tuple[float, int]] = []
    end: p.Finished | None = None
    for event in client.stream(command):
        if isinstance(event, p.TokenDelta):
            arrivals.append((time.perf_counter(), event.n_tokens))
        elif isinstance(event, p.Finished):
            end, t_end = event, time.perf_counter()
    assert end is not None and end.timings.gen_n >= min(n_gen, 32), end
    first_at, first_n = arrivals[0]
    rate = (end.timings.gen_n - first_n) / (t_end - first_at)
    gaps = [(b[0] - a[0]) * 1000 for a, b in zip(arrivals, arrivals[1:])]
    return rate, gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--gen", type=int, default=200)
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    clients = {"process": ProcessClient(), "inproc": InprocClient()}
    for client in clients.values():
        client.start()
        client.load_model(args.model)
        observed_run(client, 16)  # warm-up
    rates: dict[str, list[float]] = {"process": [], "inproc": []}
    gaps: list[float] = []
    for rep in range(args.reps):
        order = ("process", "inproc") if rep % 2 == 0 else ("inproc", "process")
        for name in order:
            rate, run_gaps = observed_run(clients[name], args.gen)
            rates[name].append(rate)
            if name == "process":
                gaps.extend(run_gaps)
    for client in clients.values():
        client.close()
    ratios = [a / b for a, b in zip(rates["process"], rates["inproc"])]
    gaps.sort()
    print(json.dumps({
        "bench": "worker",
        "model": args.model,
        "gen_tokens": args.gen,
        "reps": args.reps,
        "process_decode_tok_s": round(statistics.median(rates["process"]), 2),
        "inproc_decode_tok_s": round(statistics.median(rates["inproc"]), 2),
        "decode_ratio": round(statistics.median(ratios), 3),
        "decode_ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "token_delta_gap_ms": {
            "max": round(gaps[-1], 1),
            "p99": round(gaps[int(0.99 * (len(gaps) - 1))], 1),
            "median": round(statistics.median(gaps), 1),
            "n": len(gaps),
        },
    }, indent=2))


if __name__ == "__main__":
    main()
