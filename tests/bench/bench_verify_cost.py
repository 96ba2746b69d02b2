"""What one verification pass costs: decoding n tokens in one batch ÷ decoding one, per model.

Speculative drafting pays only when checking k+1 tokens in one target pass costs much less than
k+1 single steps. This measures that ratio directly on the models of ``bench_drafting.py``, each
in a context made the way Hearth makes it (rollback planes for the hybrid), at a fixed context
length, restoring the same state before every pass and alternating batch sizes so drift hits all
of them alike. The ceiling it implies for drafting with acceptance rate a and draft length k is
``E / cost(k+1)`` with ``E = (1 - a^(k+1)) / (1 - a)`` tokens per round (for a free drafter such as
prompt lookup). Prints one JSON object.
Usage: ``python tests/bench/bench_verify_cost.py [--context 512] [--reps 9]``.
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

from engine.models.model_files import embedded_model_path  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

SIZES = (1, 2, 3, 5)  # 5 = the last token plus Hearth's default draft of 4


def pass_times(path: Path, context: int, reps: int, draft_max: int) -> dict[int, float]:
    session = open_session(str(path), n_ctx=context + 64, draft_max=draft_max)
    try:
        rng = np.random.default_rng(0)
        session.feed(rng.integers(100, 1000, context).tolist())
        state = session.context.state_get(0)
        times: dict[int, list[float]] = {n: [] for n in SIZES}
        for _ in range(reps):
            for n in SIZES:
                tokens = rng.integers(100, 1000, n).tolist()
                started = time.perf_counter()
                session.context.decode(tokens, context, all_logits=True)
                times[n].append(time.perf_counter() - started)
                session.context.clear()
                session.context.state_set(state)
        return {n: statistics.median(t) * 1000 for n, t in times.items()}
    finally:
        session.close()


def ceiling(ratio_k1: float, acceptance: float, k: int = 4) -> float:
    expected = (1 - acceptance ** (k + 1)) / (1 - acceptance)
    return expected / ratio_k1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    models = {"smollm2": embedded_model_path(), **make_models(ROOT / "bench-models", ["hybrid-bench"])}
    results = []
    for name, path in models.items():
        ms = pass_times(path, args.context, args.reps, draft_max=4)
        ratio = {str(n): round(ms[n] / ms[1], 2) for n in SIZES}
        results.append({"model": name, "pass_ms": {str(n): round(v, 2) for n, v in ms.items()},
                        "cost_vs_one_token": ratio,
                        "lookup_ceiling_k4": {str(a): round(ceiling(ms[5] / ms[1], a), 2) for a in (0.5, 0.75, 0.9)}})
        print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"bench": "verify_cost", "context": args.context, "results": results}, indent=2))


if __name__ == "__main__":
    main()
