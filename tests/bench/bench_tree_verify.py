"""What verifying a tree of drafts costs against a chain of equal depth, per model.

A tree of ``width`` paths, each ``depth`` drafted tokens deep, is verified the way llama.cpp can
verify it on a hybrid model: one sequence per path (each branch needs its own recurrent state),
copied from the trunk (sequence 0) with ``llama_memory_seq_cp`` in a unified attention cache, so
the history's KV cells are shared, not copied), then one batch holding every path's pending token
and drafts, logits at every row. A chain is the same with width 1. Each pass starts from the same
restored state, and sizes alternate so drift hits all of them alike.

The ratio ``tree ÷ chain`` at equal depth is what a tree must win back in accepted tokens: with a
chain accepting ``E_chain`` tokens a round and a tree ``E_tree``, the tree pays only when
``E_tree / E_chain > tree ÷ chain``. Prints one JSON object.
Usage: ``python tests/bench/bench_tree_verify.py [--context 512] [--reps 7] [--models hybrid-bench,...]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.base import ContextSettings  # noqa: E402
from engine.backends.llama_cpp import LlamaContext, LlamaModel  # noqa: E402
from engine.model_files import embedded_model_path  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

SHAPES = ((0, 1), (1, 1), (2, 1), (2, 2), (2, 3), (4, 1), (4, 2), (4, 3))  # (depth, width); width 1 = a chain


def _tree_rows(context_len: int, depth: int, width: int, rng: np.random.Generator) -> tuple[list, list, list]:
    tokens, positions, seqs = [], [], []
    pending = int(rng.integers(100, 1000))
    for path in range(width):
        tokens += [pending, *rng.integers(100, 1000, depth).tolist()]
        positions += list(range(context_len, context_len + depth + 1))
        seqs += [path] * (depth + 1)
    return tokens, positions, seqs


def pass_times(path: Path, context_len: int, reps: int, threads: int) -> dict[tuple[int, int], float]:
    model = LlamaModel(path)
    max_width = max(w for _, w in SHAPES)
    rollback = max(d for d, _ in SHAPES) if model.facts().has_recurrent_state else 0
    context = LlamaContext(model, ContextSettings(n_ctx=context_len + 64, n_seq_max=max_width, n_rs_seq=rollback,
                                                  n_threads=threads, kv_unified=True))
    try:
        rng = np.random.default_rng(0)
        context.decode(rng.integers(100, 1000, context_len).tolist(), 0)
        state = context.state_get(0)
        times: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
        for _ in range(reps):
            for depth, width in SHAPES:
                tokens, positions, seqs = _tree_rows(context_len, depth, width, rng)
                started = time.perf_counter()
                for branch in range(1, width):
                    context.seq_cp(0, branch)
                context.decode_rows(tokens, positions, seqs)
                times[(depth, width)].append(time.perf_counter() - started)
                context.clear()
                context.state_set(state)
        return {shape: statistics.median(t) * 1000 for shape, t in times.items()}
    finally:
        context.close()
        model.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default="hybrid-bench,transformer-bench,smollm2")
    args = parser.parse_args()
    names = args.models.split(",")
    built = make_models(ROOT / "bench-models", [n for n in names if n != "smollm2"])
    models = {n: embedded_model_path() if n == "smollm2" else built[n] for n in names}
    results = []
    for name, path in models.items():
        ms = pass_times(path, args.context, args.reps, args.threads)
        one = ms[(0, 1)]
        rows = {f"depth{d}_width{w}": {"rows": (d + 1) * w, "ms": round(v, 2), "vs_one_token": round(v / one, 2),
                                        "vs_chain": round(v / ms[(d, 1)], 2)}
                for (d, w), v in ms.items()}
        results.append({"model": name, "one_token_ms": round(one, 2), "passes": rows})
        print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"bench": "tree_verify", "context": args.context, "reps": args.reps, "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
