"""Hearth's prefill and decode speed divided by a bare low-level llama-cpp-python loop.

Both run on the same model file, context size, batch size and thread count, alternating A/B/A/B in
one process (A/B then B/A, so neither side always runs first), so drift on a shared machine hits
both alike. Each rep gives a Hearth/bare ratio; the median ratio is reported with its spread.
The bare loop loads weights with llama.cpp's defaults (repacked layouts on); Hearth turns them off
for a weight type whose repacked kernels are not batch-exact on this CPU build (see
``engine.backends.canary``), so for such a type the ratio is the price of exact drafting.
``--models`` takes ``smollm2`` and fixture names, e.g. ``hybrid-bench-Q4_K_M`` (every type in
``QUANT_TYPES``: ``--models quant``).

``--native LIB`` compares builds instead: the portable build (the CPU build this machine's canary
chose) against LIB, a CPU backend built for this very CPU the way the old set-up did
(``-march=native``, no exactness patches; ``installers/llama_build.py --native-backend DIR`` makes
one). One CPU backend per process, so each round runs this script in two child processes, in
alternating order; per model it reports portable/native ratios of the bare loops (the build alone)
and of Hearth on the portable build against the bare loop on the native one (what a user sees),
as the median of the rounds' ratios and as best against best. On this VM a process runs either
fast or about 40 % slower for its whole life, whichever build it loads (both modes show in the
per-round decode speeds printed), so the best-of-rounds ratio is the one that compares builds.
``--draft-max N`` opens Hearth's context as a drafting server does (``hearth serve`` drafts 4 by
default): a hybrid model then keeps recurrent rollback planes, which its reading computes too.
Prints one JSON object. Usage: ``python tests/bench/bench_decode.py [--reps N] [--models a,b]
[--draft-max N] [--native LIB --rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.base import default_threads  # noqa: E402
from engine.backends.llama_cpp import LIBRARY_ENV, init_backend  # noqa: E402
from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.models.model_files import embedded_model_path  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.decoding.sampling import GREEDY  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from tests.fixtures.make_models import QUANT_TYPES, make_models  # noqa: E402

N_CTX, N_BATCH = 2048, 512
PROMPT = "The history of the city begins with a small settlement by the river. " * 60


class BareLoop:
    """The least code that prefills and greedily decodes with llama-cpp-python's C API."""

    def __init__(self, path: Path, threads: int) -> None:
        params = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = N_CTX, N_BATCH, N_BATCH
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))

    def run(self, tokens: list[int], n_gen: int) -> tuple[float, float]:
        """(prefill tok/s, decode tok/s)"""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        start = time.perf_counter()
        for begin in range(0, len(tokens), N_BATCH):
            chunk = tokens[begin : begin + N_BATCH]
            array = (llama_cpp.llama_token * len(chunk))(*chunk)
            llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(array, len(chunk)))
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(n_gen - 1):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, -1), shape=(self.n_vocab,))
            one = (llama_cpp.llama_token * 1)(int(np.argmax(logits)))
            llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(one, 1))
        decode_s = time.perf_counter() - start
        return len(tokens) / prefill_s, (n_gen - 1) / decode_s

    def close(self) -> None:
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)


def hearth_run(session, tokens: list[int], n_gen: int) -> tuple[float, float]:
    run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=n_gen))
    for _ in run:
        pass
    t = run.timings
    decode_ms = t.gen_ms - (t.ttft_ms - t.prompt_ms)  # exclude sampling the first token, as the bare loop does
    return t.prompt_n / (t.prompt_ms / 1000), (t.gen_n - 1) / (decode_ms / 1000)


def bench_model(name: str, path: Path, reps: int, n_gen: int, threads: int, draft_max: int = 0) -> dict:
    session = open_session(str(path), n_ctx=N_CTX, n_threads=threads, draft_max=draft_max)
    tokens = raw_prompt_tokens(session.model, PROMPT)[: N_CTX - n_gen - 8]
    bare = BareLoop(path, threads)
    hearth_runs, bare_runs = [], []
    hearth_run(session, tokens[:64], 8), bare.run(tokens[:64], 8)  # warm-up
    for rep in range(reps):
        if rep % 2:
            bare_runs.append(bare.run(tokens, n_gen))
            hearth_runs.append(hearth_run(session, tokens, n_gen))
        else:
            hearth_runs.append(hearth_run(session, tokens, n_gen))
            bare_runs.append(bare.run(tokens, n_gen))
    weight_type, repacked = session.model.weight_type, session.model.repacked
    rollback_planes = session.context.n_rs_seq
    session.close()
    bare.close()
    med = lambda runs, i: statistics.median(r[i] for r in runs)
    ratios = lambda i: [h[i] / b[i] for h, b in zip(hearth_runs, bare_runs)]
    return {
        "model": name,
        "weight_type": weight_type,
        "hearth_repacked": repacked,
        "hearth_rollback_planes": rollback_planes,
        "prompt_tokens": len(tokens),
        "gen_tokens": n_gen,
        "hearth_prefill_tok_s": round(med(hearth_runs, 0), 1),
        "bare_prefill_tok_s": round(med(bare_runs, 0), 1),
        "hearth_decode_tok_s": round(med(hearth_runs, 1), 2),
        "bare_decode_tok_s": round(med(bare_runs, 1), 2),
        "prefill_ratio": round(statistics.median(ratios(0)), 3),
        "decode_ratio": round(statistics.median(ratios(1)), 3),
        "prefill_ratio_range": [round(min(ratios(0)), 3), round(max(ratios(0)), 3)],
        "decode_ratio_range": [round(min(ratios(1)), 3), round(max(ratios(1)), 3)],
    }


def model_paths(wanted: list[str], cache: Path) -> dict[str, Path]:
    paths = {"smollm2": embedded_model_path()}
    generated = [n for n in wanted if n != "smollm2"]
    if generated:
        paths.update(make_models(cache, generated))
    return paths


def run_child(args: argparse.Namespace, native: Path | None) -> dict:
    env = dict(os.environ)
    env.pop(LIBRARY_ENV, None)
    if native is not None:
        env[LIBRARY_ENV] = str(native)
    command = [sys.executable, __file__, "--reps", str(args.reps), "--gen", str(args.gen), "--models", args.models,
               "--cache", str(args.cache)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def compare_builds(args: argparse.Namespace) -> dict:
    """Rounds of (portable, native) child runs in alternating order; ratios per model."""
    rounds: list[tuple[dict, dict]] = []
    for i in range(args.rounds):
        first, second = (None, args.native) if i % 2 == 0 else (args.native, None)
        a, b = run_child(args, first), run_child(args, second)
        rounds.append((a, b) if first is None else (b, a))
    results = []
    for index, model in enumerate(args.models.split(",")):
        port = [r[0]["results"][index] for r in rounds]
        nat = [r[1]["results"][index] for r in rounds]
        row = {"model": model, "weight_type": port[0]["weight_type"], "hearth_repacked": port[0]["hearth_repacked"]}
        for side, key in (("bare", "bare"), ("hearth", "hearth")):
            for phase in ("prefill", "decode"):
                mine, theirs = f"{key}_{phase}_tok_s", f"bare_{phase}_tok_s"
                row[f"{side}_{phase}_portable_over_native"] = {
                    "median": round(statistics.median(x[mine] / y[theirs] for x, y in zip(port, nat)), 3),
                    "best": round(max(x[mine] for x in port) / max(y[theirs] for y in nat), 3)}
        row["decode_tok_s"] = {"portable_bare": [x["bare_decode_tok_s"] for x in port],
                               "native_bare": [y["bare_decode_tok_s"] for y in nat]}
        results.append(row)
    return {"bench": "decode_portable_vs_native", "native": str(args.native), "rounds": args.rounds,
            "reps_per_round": args.reps, "portable_build": rounds[0][0]["cpu_build"], "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--gen", type=int, default=128)
    parser.add_argument("--models", default="smollm2,hybrid-bench")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--native", type=Path, default=None, metavar="LIB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--draft-max", type=int, default=0,
                        help="open Hearth's context as drafting does (a hybrid gets rollback planes for this many tokens)")
    args = parser.parse_args()
    if args.models == "quant":
        args.models = ",".join(["smollm2"] + [f"hybrid-bench-{t}" for t in QUANT_TYPES])
    if args.native is not None:
        print(json.dumps(compare_builds(args), indent=2))
        return
    threads = default_threads()
    build = init_backend().variant  # the bare loop runs on the same CPU build as Hearth
    wanted = args.models.split(",")
    paths = model_paths(wanted, args.cache)
    results = [bench_model(n, paths[n], args.reps, args.gen, threads, args.draft_max) for n in wanted]
    print(json.dumps({"bench": "decode", "cpu_build": build, "threads": threads, "reps": args.reps,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
