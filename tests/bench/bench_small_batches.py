"""What a small batch costs after a long context: the part of an answer's cue read apart from a question.

A question's snapshot is taken between two reads of one prompt (engine.state.snapshot_cursor), so the
read after it is a batch of a few rows, which costs about what as many single tokens do. On a
real-template fixture (default ``qwen35-0.8b-shape``) the context is filled with ``--context``
random tokens, then batches of each size in ``--rows`` are decoded at its end in turn, ``--reps``
times each (the same position every time: the planes take the batch back). Prints one JSON object:
per size, every time and the median in ms, and each median over the 1-row one's.
Usage: ``python tests/bench/bench_small_batches.py [--context 6000] [--rows 1,2,5] [--reps 4]
[--cache DIR]``.
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

import numpy as np  # noqa: E402

from engine.backends.base import ContextSettings  # noqa: E402
from engine.backends.llama_context import LlamaContext  # noqa: E402
from engine.backends.llama_cpp import LlamaModel, init_backend  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen35-0.8b-shape")
    parser.add_argument("--context", type=int, default=6000)
    parser.add_argument("--rows", default="1,2,5")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    init_backend()
    path = make_models(args.cache, [args.model])[args.model]
    context = LlamaContext(LlamaModel(path), ContextSettings(n_ctx=args.context + 512, n_threads=2,
                                                             n_rs_seq=max(sizes)))
    tokens = [int(t) for t in np.random.default_rng(0).integers(1000, 100000, args.context + max(sizes))]
    for start in range(0, args.context, 512):
        context.decode(tokens[start:min(args.context, start + 512)], start, prune=True)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(args.reps):
        for n in sizes:
            context.seq_rm(0, args.context, -1)
            began = time.perf_counter()
            context.decode(tokens[args.context:args.context + n], args.context)
            times[n].append(round((time.perf_counter() - began) * 1000, 1))
    medians = {n: statistics.median(t) for n, t in times.items()}
    print(json.dumps({"bench": "small_batches", "model": args.model, "context": args.context,
                      "ms": {str(n): {"all": t, "median": medians[n]} for n, t in times.items()},
                      "over_one_row": {str(n): round(m / medians[sizes[0]], 2) for n, m in medians.items()}},
                     indent=2))


if __name__ == "__main__":
    main()
