"""The exactness table: every weight type in ``QUANT_TYPES`` on ``hybrid-bench``, in every CPU build
this machine can run.

For each build, a child process (one CPU build per process) runs ``tests/exactness_probe.py`` on
hybrid-bench converted by llama.cpp's quantizer to each type: whether the type is loaded with
repacked weights, whether a batch after a 600-token prompt equals single-token decoding bit for bit,
and whether greedy drafting (the same file as draft model, auto-off disabled) yields the ``--draft
off`` tokens at a short and a long prompt, with its rounds and accepted drafts. Prints one JSON
object. Usage: ``python tests/bench/bench_quant_exactness.py [--models hybrid-bench]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.cpu_variants import read_variant_set  # noqa: E402
from tests.fixtures.make_models import QUANT_TYPES, make_models  # noqa: E402


def probe(variant: str, paths: list[Path]) -> dict:
    env = {**os.environ, "HEARTH_CPU_VARIANT": variant, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.exactness_probe", *map(str, paths)], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="hybrid-bench", help="hybrid-bench or hybrid-quant")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    names = [f"{args.models}-{t}" for t in QUANT_TYPES]
    paths = make_models(args.cache, names)
    builds = {}
    for variant in read_variant_set().names:
        report = probe(variant, [paths[n] for n in names])
        builds[variant] = report.get("models") or report["detail"]
    print(json.dumps({"bench": "quant_exactness", "models": args.models, "builds": builds}, indent=1))


if __name__ == "__main__":
    main()
