"""What a short batch costs as a verify batch (row-exact kernels) and as a prompt read (batched kernels).

Hearth's CPU build keeps a batch of fewer than ``EXACT_ROWS`` rows row-exact, so that a speculative
verify batch gives what single tokens give; a prompt read lowers that bound
(``engine/backends/row_kernels.py``). This decodes the same batch of ``rows`` tokens at position 0 both
ways, alternating, on a fresh context each time, and reports the median milliseconds of each and
whether their logits agree bit for bit (they may: Q8_0's integer dot products often do).

Prints one JSON object. Usage: ``python tests/bench/bench_row_kernels.py [--model PATH] [--rows 4,8,13,15,16,17]
[--reps 7]`` (``--model`` defaults to the built-in model as Hearth loads it).
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

from engine.backends import row_kernels  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from engine.models.session import open_session  # noqa: E402


def timed_decode(session, tokens: list[int], prompt: bool) -> tuple[float, list[np.ndarray]]:
    session.reset()
    started = time.perf_counter()
    session.context.decode(tokens, 0, prompt=prompt, all_logits=True)
    seconds = time.perf_counter() - started
    return seconds * 1000, [session.context.logits(i).copy() for i in range(len(tokens))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--rows", default="4,8,13,15,16,17")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    model = args.model or str(resolve_model_ref("default"))
    session = open_session(model, n_ctx=1024)
    report: dict = {"bench": "row_kernels", "model": Path(model).name, "reps": args.reps,
                    "switch": not row_kernels.short_reads_exact(), "rows": {}}
    try:
        timed_decode(session, [1, 2, 3, 4], False)  # warm: page the weights in
        for rows in (int(r) for r in args.rows.split(",")):
            tokens = [101 * (i + 1) % session.model.n_vocab for i in range(rows)]
            times: dict[bool, list[float]] = {False: [], True: []}
            logits: dict[bool, list[np.ndarray]] = {}
            for _ in range(args.reps):
                for prompt in (False, True):
                    ms, logits[prompt] = timed_decode(session, tokens, prompt)
                    times[prompt].append(ms)
            exact, read = statistics.median(times[False]), statistics.median(times[True])
            report["rows"][rows] = {"verify_ms": round(exact, 1), "prompt_read_ms": round(read, 1),
                                    "prompt_read_over_verify": round(read / exact, 3),
                                    "same_logits": all(np.array_equal(a, b) for a, b in zip(logits[False], logits[True]))}
    finally:
        session.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
