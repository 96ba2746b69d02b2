"""Where a k-row batch's time goes, per op: Hearth's build against stock llama.cpp's, under ``perf``.

Each side decodes a batch of k tokens at position 0 (the state cleared after each) ``--reps`` times
in its own process while ``perf record -e cpu-clock`` samples it: stock is ``llama-bench -p k -n 0``
from llama.cpp built with its own flags for this CPU variant (``tests/helpers/cpp_server.built_tool``),
Hearth is its engine's ``LlamaContext.decode`` on its patched build, with the last row's logits
(stock's shape) and with every row's (a verify batch's). Each process also runs a short baseline of
``--reps // 8`` batches; the difference of the two profiles over the difference of the batch counts
is CPU time per batch, with loading and start-up taken out.

Samples are grouped by what the code does (:data:`OPS`, matched on library and symbol): the
quantized matrix products (with the activations' quantization), attention, the other tensor ops, ggml's
threads meeting between ops, llama.cpp's own work around the graph (and copying logits), and Python.
Depth 0, not 256 as in ``bench_verify_stock.py``: llama-bench fills its depth again before each rep,
which the difference would not take out; at 256 tokens attention is a small share of a batch.

Prints one JSON object: per model and rows, CPU milliseconds per batch by op for each side, and the
wall time per batch each side measured under the profiler. ``--before LIBRARY`` also profiles Hearth's
side on another CPU backend file (an earlier build's ``libggml-cpu-<variant>.so``), for a change's
before and after in one run: it runs from a copy of the installed llama-cpp-python with that file in
place of its own, chosen by name and checked by its own canary as the app would (so each weight type
gets the repacked or plain kernels the app gives it, which ``HEARTH_CPU_LIBRARY`` would not). Needs
``perf`` (linux-perf).
Usage: ``python tests/bench/bench_verify_ops.py [--models default,PATH...] [--rows 1,2,5,16] [--reps 400]
[--before LIBRARY]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.cpu_check import CHECK_FILE_ENV, VARIANT_ENV  # noqa: E402

HZ = 2000  # perf samples per second of CPU

OPS = (  # (op, library part, symbol prefixes); the first that matches wins
    ("matrix products", "libggml-cpu", ("ggml_vec_dot_q", "ggml_vec_dot_iq", "hearth_", "ggml_gemv", "ggml_gemm", "quantize_row_q",
                                        "ggml_compute_forward_mul_mat", "tinyBLAS", "ggml::cpu::repack", "llamafile_sgemm",
                                        "tiled_", "bool tiled_")),
    ("attention", "libggml-cpu", ("ggml_compute_forward_flash_attn", "ggml_vec_dot_f16", "ggml_compute_forward_soft_max",
                                  "ggml_cpu_fp32_to_fp16", "ggml_cpu_fp16_to_fp32")),
    ("attention", "libm", ("__exp",)),
    ("threads meeting", "libggml-cpu", ("ggml_graph_compute_thread", "ggml_barrier", "ggml_graph_compute")),
    ("threads meeting", "libgomp", ("",)),
    ("other tensor ops", "libggml-cpu", ("",)),
    ("llama.cpp around the graph", "libllama", ("",)),
    ("llama.cpp around the graph", "libggml-base", ("",)),
    ("llama.cpp around the graph", "libggml.so", ("",)),
    ("llama.cpp around the graph", "libc.so", ("__mem",)),
    ("python", "libpython", ("",)),
    ("python", "numpy", ("",)),
)


def op_of(dso: str, symbol: str) -> str:
    for op, library, prefixes in OPS:
        if library in dso and any(symbol.startswith(p) for p in prefixes):
            return op
    return "kernel and other"


def profile(command: list[str]) -> tuple[dict[str, float], dict]:
    """CPU nanoseconds by op while ``command`` ran, and the JSON it printed last."""
    with tempfile.TemporaryDirectory(prefix="hearth-ops-") as tmp:
        data = Path(tmp) / "perf.data"
        done = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HZ), "-o", str(data), "--", *command],
                              capture_output=True, text=True, check=True)
        report = subprocess.run(["perf", "report", "-i", str(data), "-F", "period,dso,sym", "--stdio", "-g", "none",
                                 "--percent-limit", "0"], capture_output=True, text=True, check=True).stdout
    by_op: dict[str, float] = {}
    for line in report.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) < 3 or line.startswith("#") or not parts[0].isdigit():
            continue
        period, dso, symbol = int(parts[0]), parts[1], parts[2].partition("] ")[2].strip()
        symbol = symbol.removeprefix("void ").removeprefix("(anonymous namespace)::")
        by_op[op_of(dso, symbol)] = by_op.get(op_of(dso, symbol), 0) + period
    return by_op, json.loads(done.stdout.strip().splitlines()[-1] if done.stdout.lstrip().startswith("{") else done.stdout)


def per_batch(command_for, reps: int) -> tuple[dict[str, float], dict]:
    """CPU milliseconds per batch by op: (``reps`` run - a short run) / the batches between them."""
    base = max(reps // 8, 1)
    small, _ = profile(command_for(base))
    large, printed = profile(command_for(reps))
    ms = {op: max(large.get(op, 0) - small.get(op, 0), 0) / (reps - base) / 1e6 for op in set(large) | set(small)}
    return {op: round(v, 3) for op, v in sorted(ms.items(), key=lambda kv: -kv[1])}, printed


def stock_command(binary: Path, path: Path, rows: int):
    from tests.bench.bench_verify_stock import llama_bench
    return lambda reps: llama_bench(binary, path, rows, reps, 0)


def hearth_command(path: Path, rows: int, shape: str, build: list[str]):
    return lambda reps: ["env", *build, sys.executable, __file__, "--hearth-loop", str(path), str(rows), str(reps), shape]


def variant_of(library: Path) -> str:
    return library.name.removeprefix("lib").removeprefix("ggml-cpu-").split(".")[0]


def installed_build(variant: str) -> list[str]:
    return [f"{VARIANT_ENV}={variant}"]


def earlier_build(library: Path, folder: Path) -> list[str]:
    """Environment for a process that runs llama-cpp-python with ``library`` in place of its own
    build of that name, under a canary of its own (the app's choice of kernels per weight type)."""
    from engine.backends.cpu_variants import library_dir
    package = folder / "site" / "llama_cpp"
    shutil.copytree(library_dir().parent, package, symlinks=True)
    shutil.copy2(library, package / "lib" / library.name)
    return [f"PYTHONPATH={package.parent}", f"{VARIANT_ENV}={variant_of(library)}",
            f"{CHECK_FILE_ENV}={folder / 'cpu-check.json'}"]


def hearth_loop(path: str, rows: int, reps: int, shape: str) -> None:
    """Hearth's side, in its own process: ``reps`` batches of ``rows`` tokens at position 0."""
    import numpy as np

    from engine.models.session import open_session
    session = open_session(path, n_ctx=512)
    tokens = np.random.default_rng(0).integers(100, 1000, rows).tolist()
    spent = 0.0
    for _ in range(reps):
        started = time.perf_counter()
        session.context.decode(tokens, 0, all_logits=shape == "all_rows")
        spent += time.perf_counter() - started
        session.context.clear()
    session.close()
    print(json.dumps({"ms": spent / reps * 1000}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="default")
    parser.add_argument("--rows", default="1,2,5,16")
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--before", metavar="LIBRARY", help="also profile Hearth's side on this CPU backend file")
    parser.add_argument("--hearth-loop", nargs=4, metavar=("PATH", "ROWS", "REPS", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hearth_loop:
        path, rows, reps, shape = args.hearth_loop
        hearth_loop(path, int(rows), int(reps), shape)
        return
    if not shutil.which("perf"):
        raise SystemExit("this bench needs perf (apt-get install linux-perf)")
    from engine.backends.llama_cpp import init_backend
    from engine.models.model_files import resolve_model_ref
    from tests.bench.bench_verify_stock import batch_ms
    from tests.helpers.cpp_server import built_tool

    variant = init_backend().variant
    bench = built_tool(variant, "llama-bench")
    results = []
    folder = Path(tempfile.mkdtemp(prefix="hearth-ops-before-"))
    before = earlier_build(Path(args.before), folder) if args.before else None
    if before and variant_of(Path(args.before)) != variant:
        raise SystemExit(f"--before {args.before} is not the {variant} build this machine runs")
    for model in args.models.split(","):
        path = resolve_model_ref("default") if model == "default" else Path(model)
        for rows in (int(n) for n in args.rows.split(",")):
            row = {"model": path.name, "rows": rows}
            stock, printed = per_batch(stock_command(bench, path, rows), args.reps)
            row["stock_last_row"] = {"cpu_ms": stock, "wall_ms": round(batch_ms(printed, rows), 2)}
            for shape in ("last_row", "all_rows"):
                ops, printed = per_batch(hearth_command(path, rows, shape, installed_build(variant)), args.reps)
                row[f"hearth_{shape}"] = {"cpu_ms": ops, "wall_ms": round(printed["ms"], 2)}
                if before:
                    ops, printed = per_batch(hearth_command(path, rows, shape, before), args.reps)
                    row[f"before_{shape}"] = {"cpu_ms": ops, "wall_ms": round(printed["ms"], 2)}
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"bench": "verify_ops", "variant": variant, "hz": HZ, "reps": args.reps, "before": args.before,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
