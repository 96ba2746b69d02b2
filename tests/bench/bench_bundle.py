"""The Linux bundle against the development install: size, cold start to the window, first token.

    .venv/bin/python tests/bench/bench_bundle.py [--dist DIR] [--rounds 5]

Builds the downloads with ``bash installers/build_linux.sh`` into ``--dist`` unless they are there
already, then measures, alternating bundle and development install in each round (the machine is
shared and noisy, so only side-by-side ratios mean anything):

* size: the bundle folder unpacked, the tarball and the .deb, and the five largest parts of the
  folder (the top-level entries of ``_internal/`` and the executables);
* ``window_shown_ms``: a new process until the window is on screen (offscreen) with its event loop
  running, as the window's self-check reports it (``ui/self_check.py``), each run in a fresh home;
* ``first_token_ms``: ``hearth generate --max-tokens 1`` from a new process until it ends (start-up,
  model load, the prompt read, one token), in a fresh home each time;
* each with ``median`` per side and ``ratio`` = bundle / development.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "installers"))
sys.path.insert(0, str(ROOT / "installers" / "bundle"))
import layout  # noqa: E402
import smoke_bundle  # noqa: E402

QUESTION = "What is the capital of France?"
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"


def build(dist: Path) -> tuple[Path, Path, Path]:
    tarballs, debs = sorted(dist.glob("Hearth-*.tar.gz")), sorted(dist.glob("hearth_*.deb"))
    if not (tarballs and debs and (dist / layout.BUNDLE_NAME).is_dir()):
        done = subprocess.run(["bash", str(ROOT / "installers" / "build_linux.sh"), str(dist)], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(done.stderr[-3000:])
        tarballs, debs = sorted(dist.glob("Hearth-*.tar.gz")), sorted(dist.glob("hearth_*.deb"))
    return dist / layout.BUNDLE_NAME, tarballs[-1], debs[-1]


def folder_bytes(path: Path) -> int:
    """Bytes on disk, links not counted (PyInstaller links a library at the top to where it lies)."""
    if path.is_symlink():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def largest_parts(bundle: Path, count: int = 5) -> list[dict]:
    parts = [*bundle.iterdir(), *(bundle / "_internal").iterdir()]
    sizes = [(folder_bytes(p), p.relative_to(bundle).as_posix()) for p in parts if p.name != "_internal"]
    return [{"part": name, "bytes": size} for size, name in sorted(sizes, reverse=True)[:count]]


def run(command: list[str], home: Path, **extra: str) -> tuple[float, str]:
    env = {**smoke_bundle.clean_environment(home), **extra}
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=home, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} failed: {done.stderr[-2000:]}")
    return elapsed, done.stdout


def window_shown_ms(command: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        _, out = run(command, Path(home), QT_QPA_PLATFORM="offscreen", HEARTH_SELF_CHECK_QUESTION=QUESTION)
    return json.loads(out.strip().splitlines()[-1])["window_shown_ms"]


def first_token_ms(command: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        elapsed, _ = run([*command, "generate", "--max-tokens", "1", "--temperature", "0", "--json", QUESTION],
                         Path(home))
    return elapsed


def side_by_side(measure, bundle_command: list[str], dev_command: list[str], rounds: int) -> dict:
    samples: dict[str, list[float]] = {"bundle": [], "dev": []}
    for index in range(rounds):
        order = (("bundle", bundle_command), ("dev", dev_command))
        for side, command in order if index % 2 == 0 else reversed(order):
            samples[side].append(measure(command))
    medians = {side: statistics.median(values) for side, values in samples.items()}
    return {"bundle_ms": round(medians["bundle"], 1), "dev_ms": round(medians["dev"], 1),
            "ratio": round(medians["bundle"] / medians["dev"], 3),
            "samples_ms": {side: [round(v, 1) for v in values] for side, values in samples.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bundle, tarball, deb = build(args.dist.resolve())
    sizes = {"unpacked_bytes": folder_bytes(bundle), "tarball_bytes": tarball.stat().st_size,
             "deb_bytes": deb.stat().st_size, "largest_parts": largest_parts(bundle)}
    window = side_by_side(window_shown_ms, [str(bundle / layout.BUNDLE_NAME)], [str(DEV_PYTHON), "-m", "app"],
                          args.rounds)
    token = side_by_side(first_token_ms, [str(bundle / layout.cli_name())], [str(DEV_PYTHON), "-m", "app"],
                         args.rounds)
    print(json.dumps({"bundle": str(bundle), "rounds": args.rounds, "size": sizes, "window_shown": window,
                      "first_token": token}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
