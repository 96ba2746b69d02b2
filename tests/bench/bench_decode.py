"""Hearth's prefill and decode speed divided by a bare low-level llama-cpp-python loop.

Both run on the same model file, context size, batch size and thread count, alternating A/B/A/B in
one process (A/B then B/A, so neither side always runs first), so drift on a shared machine hits
both alike. Each rep gives a Hearth/bare ratio; the median ratio is reported with its spread.
Prints one JSON object. Usage: ``python tests/bench/bench_decode.py [--reps N] [--models a,b]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.base import default_threads  # noqa: E402
from engine.generation import Generation, GenerationSettings  # noqa: E402
from engine.model_files import embedded_model_path  # noqa: E402
from engine.prompts import raw_prompt_tokens  # noqa: E402
from engine.sampling import GREEDY  # noqa: E402
from engine.session import open_session  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

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


def bench_model(name: str, path: Path, reps: int, n_gen: int, threads: int) -> dict:
    session = open_session(str(path), n_ctx=N_CTX, n_threads=threads)
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
    session.close()
    bare.close()
    med = lambda runs, i: statistics.median(r[i] for r in runs)
    ratios = lambda i: [h[i] / b[i] for h, b in zip(hearth_runs, bare_runs)]
    return {
        "model": name,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--gen", type=int, default=128)
    parser.add_argument("--models", default="smollm2,hybrid-bench")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    threads = default_threads()
    paths = {"smollm2": embedded_model_path()}
    wanted = args.models.split(",")
    generated = [n for n in wanted if n != "smollm2"]
    if generated:
        paths.update(make_models(args.cache, generated))
    results = [bench_model(n, paths[n], args.reps, args.gen, threads) for n in wanted]
    print(json.dumps({"bench": "decode", "threads": threads, "reps": args.reps, "results": results}, indent=2))


if __name__ == "__main__":
    main()
