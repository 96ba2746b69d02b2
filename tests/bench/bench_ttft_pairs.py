"""Continued-turn TTFT, ``hearth serve`` against llama.cpp's C++ ``llama-server``, over several fresh pairs.

``bench_serve.py --against llama-server`` runs one pair of servers per model. On this VM a process
draws part of its speed when it starts (where its pages and threads land), so one pair's per-turn
ratios can sit above or below 1 by that draw alone, and on a model whose turns both servers read in
about the same time (the Qwen3.5-0.8B shape) a cell's side of 1 flips from run to run. Here each of
``--pairs`` pairs is started fresh (which server starts first alternates), and for each conversation
shape in ``--shapes`` (the share of the history in the first message: 0 equal messages, 0.5
document first) runs ``bench_serve.py``'s conversation: ``--turns`` turns, every request carrying
all the messages so far, who goes first alternating per turn.

A turn's ratio is llama-server's TTFT over Hearth's (above 1: Hearth answers first), for the
continued turns (2 on). Per pair and shape the JSON gives the median of all continued turns, of
those Hearth went first in and of those it went second in; then, per shape, the median over pairs
of each (``pair_medians``: the figure to quote, each pair's two servers measured in the same
minutes), every turn's ratio, the tokens each read per continued turn, and other programs' busiest
CPU use in any request.

Run ``.venv/bin/pip install -e '.[bench]'`` first, then ``python tests/bench/bench_ttft_pairs.py
[--models qwen35-0.8b-shape] [--pairs 4] [--shapes 0,0.5] [--turns 12] [--history-tokens 6600]
[--answer-tokens 16] [--context 16384] [--draft auto] [--cache DIR]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.bench_prefill_pairs import CPP, HEARTH, server_pair_arguments, start_pair  # noqa: E402
from tests.bench.bench_serve import conversation, per_model, user_message  # noqa: E402
from tests.bench.serve_servers import count_tokens  # noqa: E402


def turn_ratios(turns: list[dict]) -> list[dict]:
    """Each continued turn's llama-server TTFT over Hearth's, and whether Hearth went first
    (``bench_serve.conversation`` starts the list ``[hearth, llama-server]`` reversed on odd turns)."""
    return [{"turn": t["turn"], "ratio": round(t[f"{CPP}_ttft_ms"] / t[f"{HEARTH}_ttft_ms"], 3),
             "hearth_first": t["turn"] % 2 == 0, "read": (t[f"{HEARTH}_read_tokens"], t[f"{CPP}_read_tokens"]),
             "others_cores": max(t[f"{HEARTH}_others_cores"], t[f"{CPP}_others_cores"])}
            for t in turns[1:] if t[f"{HEARTH}_ttft_ms"]]


def medians(ratios: list[dict]) -> dict:
    """The median ratio of all the turns, of those Hearth went first in, and of those it went second in."""
    def median(rows: list[dict]) -> float | None:
        return round(statistics.median(r["ratio"] for r in rows), 3) if rows else None
    return {"all": median(ratios), "hearth_first": median([r for r in ratios if r["hearth_first"]]),
            "hearth_second": median([r for r in ratios if not r["hearth_first"]])}


def bench_model(ref: str, path: Path, args: argparse.Namespace, home: Path) -> dict:
    shapes = [float(share) for share in args.shapes.split(",")]
    per_shape: dict[float, list[list[dict]]] = {share: [] for share in shapes}
    for pair in range(args.pairs):
        folder = home / f"pair{pair}"
        folder.mkdir()
        servers = start_pair(ref, path, args, folder, pair)
        try:
            words = round(args.history_tokens / (count_tokens(servers[1], user_message(0, 400)) / 400))
            for share in shapes:
                turns, _ = conversation(servers, args.turns, words, share, args.answer_tokens)
                per_shape[share].append(turn_ratios(turns))
        finally:
            for server in servers:
                server.stop()
    return {f"first_share_{share}": summary(pairs) for share, pairs in per_shape.items()}


def summary(pairs: list[list[dict]]) -> dict:
    per_pair = [medians(ratios) for ratios in pairs]
    over_pairs = {key: round(statistics.median(m[key] for m in per_pair if m[key] is not None), 3)
                  for key in ("all", "hearth_first", "hearth_second")}
    every = [r for ratios in pairs for r in ratios]
    reads = [r["read"] for r in every]
    return {"pair_medians": over_pairs, "per_pair": per_pair, "all_turns": medians(every),
            "ratios": [[r["ratio"] for r in ratios] for ratios in pairs],
            "read_tokens": {HEARTH: [min(h for h, _ in reads), max(h for h, _ in reads)],
                            CPP: [min(c for _, c in reads), max(c for _, c in reads)]},
            "others_cores_max": max(r["others_cores"] for r in every)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="qwen35-0.8b-shape")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--shapes", default="0,0.5", help="first-message shares of the history, comma-separated")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--history-tokens", type=int, default=6600)
    parser.add_argument("--answer-tokens", type=int, default=16)
    args = server_pair_arguments(parser)
    variant, results = per_model(args, "hearth-bench-ttft-", lambda ref, path, home: bench_model(ref, path, args, home))
    print(json.dumps({"bench": "ttft_pairs", "cpu_build": variant, "threads": args.threads, "context": args.context,
                      "hearth_draft": args.draft, "pairs": args.pairs, "turns": args.turns,
                      "history_tokens": args.history_tokens, "models": results}, indent=2))


if __name__ == "__main__":
    main()
