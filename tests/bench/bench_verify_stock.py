"""A k-row batch after 256 tokens of context, over one row: Hearth's build against stock llama.cpp's.

Stock is llama.cpp built from the same vendored source with its own flags for this machine's CPU
variant (``tests/helpers/cpp_server.built_tool``); its ``llama-bench -p k -d 256 -n 0`` times a batch
of k tokens after 256 of context, asking for the last row's logits only. Hearth's side decodes the
same shape through its engine (its patched build, the exact-row kernels a verify batch takes) twice:
with the last row's logits only, which is stock's shape, and with every row's logits, which a verify
batch needs (each row then pays the output layer: for SmolLM2 a 49,152 x 576 matrix, a fifth of the
model). Each Hearth number is the median of ``--reps`` decodes of a state restored each time, the
sizes alternating; llama-bench's is its own mean over ``--reps``. The two sides take turns
``--rounds`` times (a fresh session each round) and each figure is the median over the rounds: one
run of either side on this virtual machine can be 10-15 % off another of the same build. Ratios
are each side's k-row time over its own one-row time, so the two builds' absolute speeds do not
enter. Per op, the two builds' batches spend the same time (``bench_verify_ops.py``).

Prints one JSON object. Usage: ``python tests/bench/bench_verify_stock.py [--models default,PATH...]
[--rows 1,2,3,5] [--reps 9] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.llama_cpp import init_backend  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from tests.helpers.cpp_server import built_tool  # noqa: E402

DEPTH = 256


def hearth_ms(path: Path, sizes: list[int], reps: int) -> dict[str, dict[int, float]]:
    session = open_session(str(path), n_ctx=DEPTH + 64)
    try:
        rng = np.random.default_rng(0)
        session.feed(rng.integers(100, 1000, DEPTH).tolist())
        state = session.context.state_get(0)
        times = {shape: {n: [] for n in sizes} for shape in ("last_row", "all_rows")}
        for _ in range(reps):
            for shape in times:
                for n in sizes:
                    tokens = rng.integers(100, 1000, n).tolist()
                    started = time.perf_counter()
                    session.context.decode(tokens, DEPTH, all_logits=shape == "all_rows")
                    times[shape][n].append(time.perf_counter() - started)
                    session.context.clear()
                    session.context.state_set(state)
        return {shape: {n: statistics.median(t) * 1000 for n, t in by.items()} for shape, by in times.items()}
    finally:
        session.close()


def stock_ms(binary: Path, path: Path, sizes: list[int], reps: int) -> dict[int, float]:
    out = {}
    for n in sizes:
        done = subprocess.run(llama_bench(binary, path, n, reps, DEPTH), capture_output=True, text=True, check=True)
        out[n] = batch_ms(json.loads(done.stdout), n)
    return out


def llama_bench(binary: Path, path: Path, rows: int, reps: int, depth: int) -> list[str]:
    """Stock's command for ``reps`` batches of ``rows`` tokens after ``depth`` of context (last row's logits)."""
    return [str(binary), "-m", str(path), "-p", str(rows), "-n", "0", "-d", str(depth), "-r", str(reps),
            "-fa", "1", "-t", "2", "-o", "json"]


def batch_ms(printed: list[dict], rows: int) -> float:
    """One batch's milliseconds from llama-bench's JSON."""
    return rows / float(printed[0]["avg_ts"]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="default")
    parser.add_argument("--rows", default="1,2,3,5")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    variant = init_backend().variant
    bench = built_tool(variant, "llama-bench")
    results = []
    for model in args.models.split(","):
        path = resolve_model_ref("default") if model == "default" else Path(model)
        turns = [(hearth_ms(path, sizes, args.reps), stock_ms(bench, path, sizes, args.reps)) for _ in range(args.rounds)]
        hearth = {shape: {n: statistics.median(h[shape][n] for h, _ in turns) for n in sizes} for shape in turns[0][0]}
        stock = {n: statistics.median(s[n] for _, s in turns) for n in sizes}
        row = {"model": path.name}
        for name, ms in (("stock_last_row", stock), ("hearth_last_row", hearth["last_row"]),
                         ("hearth_all_rows", hearth["all_rows"])):
            row[name] = {"ms": {str(n): round(ms[n], 2) for n in sizes},
                         "over_one_row": {str(n): round(ms[n] / ms[sizes[0]], 2) for n in sizes}}
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"bench": "verify_stock", "variant": variant, "depth": DEPTH, "reps": args.reps, "rounds": args.rounds,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
