"""Any benchmark here, run side by side on this tree and on an earlier commit: ratios, not absolutes.

The earlier commit is checked out once into a worktree beside this one (``git worktree add``); both
run with this environment's Python and the same cached bench models (the worktree's ``bench-models``
links to this tree's). Each round runs the benchmark on both, in turn ABBA (this tree, the base, the
base, this tree), so drift on a shared machine hits both alike. Every number in the benchmark's JSON
is compared: the report gives, per dotted key, this tree's and the base's medians over the rounds and
their ratio (this tree / base). Whether a larger or smaller number is better is the benchmark's to
say (time: smaller; speed: larger).
Prints one JSON object.
Usage: ``python tests/bench/against_commit.py --base REV [--rounds 2] BENCH.py [BENCH ARGS ...]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def base_tree(rev: str) -> Path:
    """A worktree of ``rev`` (made once, reused), with this tree's bench models."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    tree = ROOT.parent / f".hearth-base-{sha[:12]}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha], check=True,
                       capture_output=True)
    models = tree / "bench-models"
    if not models.exists() and (ROOT / "bench-models").exists():
        models.symlink_to(ROOT / "bench-models")
    return tree


def run(tree: Path, bench: str, args: list[str]) -> dict:
    """The benchmark's JSON (the last line that parses as an object, or the whole output)."""
    done = subprocess.run([sys.executable, str(tree / "tests" / "bench" / bench), *args], cwd=tree,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{bench} failed in {tree} (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        for line in reversed(done.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    raise SystemExit(f"{bench} printed no JSON object in {tree}")


def numbers(value: object, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON value, by its dotted path."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix: float(value)}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    found: dict[str, float] = {}
    for key, inner in items:
        found.update(numbers(inner, f"{prefix}.{key}" if prefix else str(key)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the earlier commit (a revision git understands)")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds (each runs the benchmark 4 times)")
    parser.add_argument("bench", help="a script in tests/bench, e.g. bench_resume.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    options = parser.parse_args()
    base = base_tree(options.base)
    runs: dict[str, list[dict[str, float]]] = {"head": [], "base": []}
    for _ in range(options.rounds):
        for side in ("head", "base", "base", "head"):
            runs[side].append(numbers(run(ROOT if side == "head" else base, options.bench, options.args)))
    keys = [k for k in runs["head"][0] if all(k in r for r in runs["head"] + runs["base"])]
    compared = {}
    for key in keys:
        head = statistics.median(r[key] for r in runs["head"])
        before = statistics.median(r[key] for r in runs["base"])
        compared[key] = {"head": head, "base": before, "ratio": round(head / before, 3) if before else None}
    print(json.dumps({"bench": options.bench, "args": options.args, "base": options.base,
                      "rounds": options.rounds, "compared": compared}, indent=2))


if __name__ == "__main__":
    main()
