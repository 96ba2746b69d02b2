"""A cost model of decoding and of a k-row verify batch, from measured quantities; checked against
this machine; then what it predicts for laptops, with and without drafting.

The model, in two regimes (one row streams the weights with part of its dot products hidden under
the reads; in a batch the second row already costs a whole row's dot products, ``bench_verify_ops.py``):

    t(1) = W / B  +  P * c1                     (decoding one token)
    t(k) = W / B  +  P * (a + k * c)            (a batch of k >= 2 rows)

* W: bytes of weights one pass reads: every tensor except the token embeddings, of which a pass
  reads k rows (unless they are also the output layer), and except an MTP layer. Read from the GGUF.
* P: multiply-adds per row: the elements of those tensors.
* B: memory bandwidth, measured here: numpy reducing a 1 GiB buffer on as many threads as decoding uses.
* c1, a, c: CPU seconds per multiply-add (the work that is not hidden under the reads: dot products,
  threads meeting between ops), per weight type, fitted on one model per type (``--fit``): c1 from
  t(1), a and c by a line through t(k) - W/B for k >= 2. The other models' t(k) (``--check``) are
  then *predicted* and set beside their measurements.

Each t(k) is a verify batch as Hearth runs it (every row's logits) after 256 tokens of context: the
median of ``--reps`` decodes of a restored state (``bench_verify_stock.hearth_ms``), then the median over
``--rounds`` rounds that measure every model in turn.

For a laptop (:data:`LAPTOPS`: cores, memory bandwidth, stated figures) the same model runs with its
bandwidth (at :data:`STREAM_SHARE` of the stated peak) and its compute (this machine's c, over the
laptop's cores, each weighted by its speed against a core here, over the 2 here, for c1, a and c alike). Drafting at a
per-token acceptance a with chains of d tokens gives (1 + a + ... + a^d) tokens a round, for
t(d+1) + d * DRAFT_STEP * t(1); the best d in 1..4 is taken (what auto's length adapts to).

Prints one JSON object. Usage: ``python tests/bench/bench_cost_model.py [--reps 9] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

THREADS = 2  # what Hearth decodes with on this machine
ROWS = (1, 2, 3, 5)
STREAM_SHARE = 0.75  # of a laptop's stated peak bandwidth that a streaming read reaches (assumed)
DRAFT_STEP = 0.08  # a head's drafted token, in target steps (the trained SmolLM2 head here: docs/drafting.md)
ACCEPTANCE = {  # per drafted token
    "trained head, SmolLM2 (here)": 0.41,
    "set agreement 0.5": 0.5,
    "EAGLE-3 public head, chat": 0.65,
    "set agreement 0.7": 0.7,
    "llama.cpp MTP, Gemma 4": 0.68,
    "MTP, one token (Qwen3.6)": 0.88,
    "set agreement 0.9": 0.9,
}
LAPTOPS = {  # cores: (count, speed of one against a core here, assumed); bandwidth: stated peak, GB/s
    "this machine (2 cores, measured)": {"cores": [], "peak_gbs": None},
    "Snapdragon X Elite X1E-78 (12 Oryon, LPDDR5x-8448)": {"cores": [(12, 1.0)], "peak_gbs": 135.0},
    "Apple M3 (4P+4E, LPDDR5-6400)": {"cores": [(4, 1.1), (4, 0.35)], "peak_gbs": 100.0},
    "Core Ultra 7 155H (6P+8E, DDR5-5600 2ch)": {"cores": [(6, 0.7), (8, 0.35)], "peak_gbs": 89.6},
}
CATALOGUE = {  # name: (Q4_K_M file GB, layers): model_store/catalogue.json and the models' configs
    "lfm2-350m": (0.23, 16), "qwen3.5-0.8b": (0.53, 24), "llama-3.2-1b": (0.81, 16), "granite-4.0-h-1b": (0.90, 40),
    "lfm2-1.2b": (0.73, 16), "qwen3.5-2b": (1.28, 24), "granite-4.0-h-micro": (1.94, 40), "qwen3.5-4b": (2.74, 32),
    "qwen3.5-9b": (5.68, 32),
}
Q4_K_M_BITS = 4.85  # bits a weight in a Q4_K_M file, on average


def bandwidth_gbs(threads: int = THREADS, size: int = 1 << 30, reps: int = 5) -> float:
    """Best of ``reps`` reads of a ``size``-byte buffer, split over ``threads`` (numpy lets go of the GIL)."""
    buffer = np.ones(size // 8, dtype=np.uint64)
    best = 0.0
    for _ in range(reps):
        parts = [threading.Thread(target=np.bitwise_or.reduce, args=(chunk,)) for chunk in np.array_split(buffer, threads)]
        started = time.perf_counter()
        for part in parts:
            part.start()
        for part in parts:
            part.join()
        best = max(best, size / (time.perf_counter() - started) / 1e9)
    return best


def weights(path: Path) -> dict:
    """What one pass reads: bytes, multiply-adds per row, layers, and the main weight type."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def field(key: str) -> int:
        found = reader.fields.get(f"{arch}.{key}")
        return int(found.parts[-1][0]) if found else 0

    layers = field("block_count") - field("nextn_predict_layers")  # an MTP layer is not read by a pass
    names = {t.name for t in reader.tensors}
    tied = "output.weight" not in names
    read = [t for t in reader.tensors if (t.name != "token_embd.weight" or tied)
            and not (t.name.startswith("blk.") and int(t.name.split(".")[1]) >= layers)]
    kinds: dict[str, int] = {}
    for t in read:
        kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + int(t.n_bytes)
    return {"bytes": sum(int(t.n_bytes) for t in read), "macs": sum(int(t.n_elements) for t in read),
            "layers": layers, "type": max(kinds, key=kinds.get)}


def fit(w: dict, ms: dict[int, float], gbs: float) -> dict:
    """c1 from t(1); a and c from a line through t(k) - W/B over the batches of 2 rows or more."""
    reads = w["bytes"] / (gbs * 1e9)
    rows = np.array([k for k in sorted(ms) if k >= 2], dtype=float)
    slope, intercept = np.polyfit(rows, [ms[int(k)] / 1000 - reads for k in rows], 1)
    per_mac = 1e12 / w["macs"]
    return {"c1_ps": (ms[1] / 1000 - reads) * per_mac, "a_ps": float(intercept) * per_mac, "c_ps": float(slope) * per_mac}


def predict_ms(w: dict, k: int, gbs: float, constants: dict, cores: float = THREADS) -> float:
    cpu_ps = constants["c1_ps"] if k == 1 else constants["a_ps"] + k * constants["c_ps"]
    return (w["bytes"] / (gbs * 1e9) + w["macs"] * cpu_ps * 1e-12 * THREADS / cores) * 1000


def drafted_speedup(t: callable, a: float, step: float = DRAFT_STEP, *, auto: bool = True) -> tuple[float, int]:
    """The best chain length's speed-up over plain decoding at per-token acceptance ``a``, a drafted
    token costing ``step`` target steps; with ``auto``, 1.0 (chain 0) where every length loses."""
    best = (1.0, 0) if auto else (0.0, 0)
    for d in range(1, 5):
        tokens = sum(a ** i for i in range(d + 1))
        best = max(best, (tokens * t(1) / (t(d + 1) + d * step * t(1)), d))
    return round(best[0], 2), best[1]


def measure(models: dict[str, Path], reps: int, rounds: int) -> dict[str, dict]:
    """t(k) per model: the median over ``rounds`` that take every model in turn (this virtual machine
    runs a while fast and a while 10-40 % slower, so each round meets every model in the same mood)."""
    from tests.bench.bench_verify_stock import hearth_ms

    runs: dict[str, list[dict[int, float]]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, path in models.items():
            runs[name].append(hearth_ms(path, list(ROWS), reps)["all_rows"])
            print(json.dumps({name: runs[name][-1]}), file=sys.stderr, flush=True)
    return {name: {"weights": weights(path), "ms": {k: statistics.median(r[k] for r in runs[name]) for k in ROWS}}
            for name, path in models.items()}


def laptops(gbs_here: float, constants: dict) -> list[dict]:
    rows = []
    for laptop, spec in LAPTOPS.items():
        gbs = spec["peak_gbs"] * STREAM_SHARE if spec["peak_gbs"] else gbs_here
        cores = sum(n * speed for n, speed in spec["cores"]) or THREADS
        for model, (gb, layers) in CATALOGUE.items():
            w = {"bytes": gb * 1e9, "macs": gb * 1e9 * 8 / Q4_K_M_BITS, "layers": layers}

            def t(k: int, w=w, gbs=gbs, cores=cores) -> float:
                return predict_ms(w, k, gbs, constants, cores)

            cell = {"laptop": laptop, "model": model, "plain_tok_s": round(1000 / t(1), 1),
                    "verify_5_over_1": round(t(5) / t(1), 2)}
            for name, a in ACCEPTANCE.items():
                speedup, d = drafted_speedup(t, a)
                cell[name] = {"speedup": speedup, "chain": d, "tok_s": round(1000 / t(1) * speedup, 1)}
            rows.append(cell)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fit", default="default=Q8_0,lfm2-350m-shape=Q4_K")
    parser.add_argument("--check", default="qwen35-0.8b-shape,llama-3.2-1b-shape,granite-4.0-h-1b-shape")
    args = parser.parse_args()
    from engine.models.model_files import resolve_model_ref
    from tests.helpers.real_models import real_model

    fit_names = dict(item.split("=") for item in args.fit.split(","))
    check_names = args.check.split(",")
    paths = {n: resolve_model_ref("default") if n == "default" else real_model(n) for n in [*fit_names, *check_names]}
    gbs = bandwidth_gbs()
    measured = measure(paths, args.reps, args.rounds)
    constants = {kind: fit(measured[n]["weights"], measured[n]["ms"], gbs) for n, kind in fit_names.items()}
    q4 = constants.get("Q4_K")
    checks = []
    for name in check_names:
        w, ms = measured[name]["weights"], measured[name]["ms"]
        kind = "Q8_0" if w["type"] == "Q8_0" else "Q4_K"
        predicted = {k: predict_ms(w, k, gbs, constants[kind]) for k in ROWS}
        checks.append({"model": name, "type": w["type"], "fitted_on": kind,
                       "measured_ms": {k: round(ms[k], 2) for k in ROWS},
                       "predicted_ms": {k: round(v, 2) for k, v in predicted.items()},
                       "error": {k: round(predicted[k] / ms[k] - 1, 3) for k in ROWS}})
    for check in checks:  # a free drafter at a set agreement, kept on, as bench_agreement.py measures it
        w = measured[check["model"]]["weights"]
        check["free_drafter_speedup"] = {
            a: drafted_speedup(lambda k, w=w, kind=check["fitted_on"]: predict_ms(w, k, gbs, constants[kind]), a, 0.0,
                               auto=False)[0]
            for a in (0.5, 0.7, 0.9)}
    print(json.dumps({"bench": "cost_model", "bandwidth_gbs": round(gbs, 1), "threads": THREADS,
                      "stream_share": STREAM_SHARE, "draft_step": DRAFT_STEP,
                      "constants": {k: {n: round(v, 3) for n, v in c.items()} for k, c in constants.items()},
                      "fitted": {n: {"weights": measured[n]["weights"],
                                     "measured_ms": {k: round(v, 2) for k, v in measured[n]["ms"].items()}}
                                 for n in fit_names},
                      "checks": checks, "laptops": laptops(gbs, q4) if q4 else []}, indent=2))


if __name__ == "__main__":
    main()
