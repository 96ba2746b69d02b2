"""What verifying a tree of drafts costs against a chain of equal depth, per model.

A tree of ``width`` paths, each ``depth`` drafted tokens deep, is verified as Hearth verifies it
(:class:`engine.speculative.tree_state.TreeState`): one sequence per path, each with its own
recurrent state, copied from the trunk in a unified attention cache (the history's KV cells are
shared, not copied), then one batch holding every path's pending token and drafts, logits at every
row. A chain is one batch of depth + 1 rows on the trunk. Each pass starts from the same restored
state, and shapes alternate so drift hits all of them alike.

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
from engine.backends.llama_context import LlamaContext  # noqa: E402
from engine.backends.llama_cpp import LlamaModel  # noqa: E402
from engine.models.model_files import embedded_model_path  # noqa: E402
from engine.speculative.tree_state import TreeState  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

SHAPES = ((0, 1), (1, 1), (2, 1), (2, 2), (2, 3), (4, 1), (4, 2), (4, 3))  # (depth, width); width 1 = a chain


def _paths(depth: int, width: int, rng: np.random.Generator) -> list[list[int]]:
    return [rng.integers(100, 1000, depth).tolist() for _ in range(width)]


def pass_times(path: Path, context_len: int, reps: int, threads: int) -> dict[tuple, float]:
    """Median ms of one verify pass per (depth, width), and per (depth, width, "after rollback"): the
    same pass when the last round left a rollback pending on the trunk (a tree's copies then get the
    trunk's recurrent state through a blob; a chain applies the rollback itself)."""
    model = LlamaModel(path)
    recurrent = model.facts().has_recurrent_state
    max_width = max(w for _, w in SHAPES)
    rollback = max(d for d, _ in SHAPES) if recurrent else 0
    context = LlamaContext(model, ContextSettings(n_ctx=context_len + 64, n_seq_max=max_width + 1, n_rs_seq=rollback,
                                                  n_threads=threads, kv_unified=True))
    tree = TreeState(context, recurrent)
    shapes = [*SHAPES, *((d, w, "after rollback") for d, w in SHAPES if d == 4)]
    try:
        rng = np.random.default_rng(0)
        context.decode(rng.integers(100, 1000, context_len).tolist(), 0)
        state = context.state_get(0)
        times: dict[tuple, list[float]] = {shape: [] for shape in shapes}
        for _ in range(reps):
            for shape in shapes:
                depth, width, start = shape[0], shape[1], context_len
                if len(shape) == 3:  # a round kept 1 of 3 tokens: its rollback waits for the next decode
                    context.decode([5, 6, 7], context_len, all_logits=True)
                    context.seq_rm(0, context_len + 1, -1)
                    start += 1
                pending, paths = int(rng.integers(100, 1000)), _paths(depth, width, rng)
                started = time.perf_counter()
                if width == 1:
                    context.decode([pending, *paths[0]], start, all_logits=True)
                else:
                    tree.decode(pending, paths, start)
                times[shape].append(time.perf_counter() - started)
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
        rows = {"_".join([f"depth{shape[0]}", f"width{shape[1]}", *shape[2:]]).replace(" ", "_"): {
                    "rows": (shape[0] + 1) * shape[1], "ms": round(v, 2), "vs_one_token": round(v / one, 2),
                    "vs_chain": round(v / ms[shape[:1] + (1,) + shape[2:]], 2)}
                for shape, v in ms.items()}
        results.append({"model": name, "one_token_ms": round(one, 2), "passes": rows})
        print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"bench": "tree_verify", "context": args.context, "reps": args.reps, "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
