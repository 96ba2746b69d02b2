"""Prompt reading, ``hearth serve`` against llama.cpp's C++ ``llama-server``, over several fresh pairs.

On this VM a process's speed is partly a lottery drawn when it starts (where its pages and threads
land): one pair of servers can read 10–20 % apart from the next pair on the same file, and
``bench_serve.py``'s single pair measures that draw as much as the servers. Here each of ``--pairs``
pairs is started fresh (the order of starting alternates too), warmed with one short request, and
reads ``--reps`` new conversations of about ``--prefill-tokens`` each, alternating who goes first,
one answer token each. Speed is the prompt's tokens over the time to the first token as the client
sees it.

Per model the JSON gives every speed, per server the best and the median over all pairs, and
Hearth's ratios to llama-server: ``pair_ratios`` (per pair, Hearth's median over llama-server's:
the two measured in the same minutes, so a noisy neighbour or a slow draw weighs on both) and
their median ``pair_ratio_median``, the figure to quote; ``best_ratio`` (best against best) and
``median_ratio`` (over all pairs at once). Servers run as ``bench_serve.py --against llama-server`` runs them (same
file, context, batch, threads, CPU build; tests/bench/serve_servers.py).

Run ``.venv/bin/pip install -e '.[bench]'`` first, then
``python tests/bench/bench_prefill_pairs.py [--models hybrid-bench,hybrid-bench-Q8_0,...] [--pairs 3]
[--reps 3] [--prefill-tokens 2000] [--context 16384] [--draft auto] [--cache DIR]``.
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

from engine.backends.base import default_threads  # noqa: E402
from engine.protocol import DEFAULTS  # noqa: E402
from tests.bench.bench_serve import PAUSE_S, SYSTEM, alternating, per_model, user_message  # noqa: E402
from tests.bench.serve_servers import Server, count_tokens, start_baseline, start_hearth, stream_chat  # noqa: E402

HEARTH, CPP = "hearth", "cpp_llama_server"


def start_pair(ref: str, path: Path, args: argparse.Namespace, home: Path, order: int) -> list[Server]:
    servers: list[Server] = []
    starters = [lambda: start_hearth(ref, args.context, args.draft, home, None),
                lambda: start_baseline(path, args, home, None)]
    try:
        for start in alternating(starters, order):
            servers.append(start())
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return sorted(servers, key=lambda s: s.name != HEARTH)  # hearth first


def read_once(server: Server, words: int, seed: int) -> tuple[float, float]:
    """(tokens per second, other programs' busy cores) for one new conversation's prompt."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_message(seed, words)}]
    time.sleep(PAUSE_S)
    reply = stream_chat(server, messages, 1)
    tokens = reply.usage.get("prompt_tokens") or reply.timings.get("prompt_n")
    return tokens / (reply.ttft_ms / 1000), reply.others_cores


def bench_model(ref: str, path: Path, args: argparse.Namespace, home: Path) -> dict:
    speeds: dict[str, list[float]] = {HEARTH: [], CPP: []}
    pair_ratios: list[float] = []
    busiest = 0.0
    for pair in range(args.pairs):
        before = {name: len(values) for name, values in speeds.items()}
        folder = home / f"pair{pair}"
        folder.mkdir()
        servers = start_pair(ref, path, args, folder, pair)
        try:
            per_word = count_tokens(servers[1], user_message(0, 400)) / 400
            words = round(args.prefill_tokens / per_word)
            for server in servers:  # warm: the first request pays for graph allocation
                read_once(server, 40, 7)
            for rep in range(args.reps):
                for server in alternating(servers, rep + pair):
                    speed, others = read_once(server, words, 1000 + 100 * pair + rep)
                    speeds[server.name].append(round(speed, 1))
                    busiest = max(busiest, others)
                    print(json.dumps({"pair": pair, "rep": rep, "server": server.name, "tok_s": round(speed, 1),
                                      "others_cores": others}), file=sys.stderr)
        finally:
            for server in servers:
                server.stop()
        this_pair = {name: statistics.median(values[before[name]:]) for name, values in speeds.items()}
        pair_ratios.append(round(this_pair[HEARTH] / this_pair[CPP], 3))
    best = {name: max(values) for name, values in speeds.items()}
    median = {name: statistics.median(values) for name, values in speeds.items()}
    return {"all": speeds, "best": best, "median": median,
            "best_ratio": round(best[HEARTH] / best[CPP], 3),
            "median_ratio": round(median[HEARTH] / median[CPP], 3),
            "pair_ratios": pair_ratios, "pair_ratio_median": statistics.median(pair_ratios),
            "others_cores_max": busiest}


def server_pair_arguments(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The servers' options both pair benchmarks share; the parsed arguments, against llama-server."""
    parser.add_argument("--context", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--draft", default=DEFAULTS.draft, help="hearth serve's --draft")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    args.against = "llama-server"
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="hybrid-bench,hybrid-bench-Q8_0,hybrid-bench-Q4_0,hybrid-bench-Q4_K_M")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--prefill-tokens", type=int, default=2000)
    args = server_pair_arguments(parser)
    variant, results = per_model(args, "hearth-bench-prefill-",
                                 lambda ref, path, home: bench_model(ref, path, args, home))
    print(json.dumps({"bench": "prefill_pairs", "cpu_build": variant, "threads": args.threads,
                      "context": args.context, "hearth_draft": args.draft, "pairs": args.pairs, "reps": args.reps,
                      "prefill_tokens": args.prefill_tokens, "models": results}, indent=2))


if __name__ == "__main__":
    main()
