"""Which weight layout the built-in model should run in: its shipped Q4_1 or a copy llama.cpp makes.

The embedded SmolLM2 ships as Q4_1, a type ggml reads prompts with row by row (no batch kernel and
no repacking). llama.cpp's own quantizer (``--allow-requantize``) turns the file into each type of
``--types``; every copy is then compared with the shipped file on three things:

* **answers**: the greedy answers (temperature 0, the model's other defaults, drafting off) to the
  prompts of ``bench_loops.py``, token for token: how many are identical, and how many tokens the
  two answers share on average before they part;
* **perplexity** on a fixed text every Debian machine has (``/usr/share/common-licenses/GPL-3``, or
  ``--text``): 512-token windows, the second half of each scored, as ``llama-perplexity`` does;
* **speed** (``--speed``): reading one 512-token batch and writing 16 single tokens, the median of
  ``--reps`` alternating runs in this process (so drift hits every type alike).

Prints one JSON object. Usage: ``python tests/bench/bench_embedded_layout.py [--types Q8_0,Q4_0]
[--limit N] [--max-tokens N] [--speed] [--reps N] [--cache DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.engine_clients.client import new_request_id  # noqa: E402
from app.engine_clients.inproc_client import InprocClient  # noqa: E402
from app.services.sampling_defaults import resolve_sampling  # noqa: E402
from engine import protocol as p  # noqa: E402
from engine.backends.llama_cpp import quantize  # noqa: E402
from engine.models.model_files import embedded_model_path  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from tests.bench.bench_loops import PROMPTS  # noqa: E402

WINDOW = 512
TEXT = Path("/usr/share/common-licenses/GPL-3")


def greedy_answers(path: Path, prompts: list[str], max_tokens: int) -> list[list[int]]:
    spec = msgspec.structs.replace(resolve_sampling(embedded_model_path()).spec(), temperature=0.0)
    client = InprocClient()
    client.start()
    answers = []
    try:
        client.load_model(str(path))
        for prompt in prompts:
            command = p.Chat(request_id=new_request_id("layout"), messages=[p.WireMessage("user", prompt)],
                             sampling=spec, max_tokens=max_tokens, draft=p.DraftSpec("off"))
            finished = next(e for e in client.stream(command) if isinstance(e, (p.Finished, p.Error)))
            if isinstance(finished, p.Error):
                raise RuntimeError(finished.message)
            answers.append(list(finished.token_ids))
    finally:
        client.close(mode="abort")
    return answers


def perplexity(path: Path, text: str, windows: int) -> float:
    session = open_session(str(path), n_ctx=WINDOW, n_threads=2)
    try:
        tokens = session.model.tokenize(text, add_special=False, parse_special=False)
        nll, count = 0.0, 0
        for start in range(0, min(len(tokens) - WINDOW, windows * WINDOW), WINDOW):
            chunk = [session.model.bos, *tokens[start:start + WINDOW - 1]]
            session.context.clear()
            session.context.decode(chunk, 0, all_logits=True)
            for row in range(WINDOW // 2, WINDOW - 1):
                logits = session.context.logits(row).astype(np.float64)
                top = logits.max()
                log_z = top + math.log(np.exp(logits - top).sum())
                nll += log_z - logits[chunk[row + 1]]
                count += 1
        return round(math.exp(nll / count), 4)
    finally:
        session.close()


def speeds(paths: dict[str, Path], reps: int) -> dict[str, dict[str, float]]:
    sessions = {name: open_session(str(path), n_ctx=1024) for name, path in paths.items()}
    rng = np.random.default_rng(0)
    prompt = rng.integers(100, 10000, WINDOW).tolist()
    times: dict[str, dict[str, list[float]]] = {name: {"read": [], "write": []} for name in paths}
    try:
        for _ in range(reps):
            for name, session in sessions.items():
                session.context.clear()
                started = time.perf_counter()
                session.context.decode(prompt, 0)
                times[name]["read"].append(time.perf_counter() - started)
                started = time.perf_counter()
                for i in range(16):
                    session.context.decode([prompt[i]], WINDOW + i)
                times[name]["write"].append(time.perf_counter() - started)
    finally:
        for session in sessions.values():
            session.close()
    return {name: {"read_tok_s": round(WINDOW / statistics.median(t["read"]), 1),
                   "write_tok_s": round(16 / statistics.median(t["write"]), 1)} for name, t in times.items()}


def shared_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--types", default="Q8_0,Q4_0,Q5_0,IQ4_NL,F16")
    parser.add_argument("--limit", type=int, default=len(PROMPTS))
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--windows", type=int, default=12, help="512-token windows of the text scored")
    parser.add_argument("--text", type=Path, default=TEXT)
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models" / "embedded-layouts")
    args = parser.parse_args()
    shipped = embedded_model_path()
    args.cache.mkdir(parents=True, exist_ok=True)
    paths = {"shipped": shipped}
    for weight_type in filter(None, args.types.split(",")):
        target = args.cache / f"{shipped.stem}.as-{weight_type}.gguf"
        if not target.exists():
            quantize(shipped, target, weight_type, requantize=True, threads=2)
        paths[weight_type] = target
    prompts = PROMPTS[:args.limit]
    text = args.text.read_text(encoding="utf-8")
    answers = {name: greedy_answers(path, prompts, args.max_tokens) for name, path in paths.items()}
    report: dict = {"bench": "embedded_layout", "shipped": shipped.name, "prompts": len(prompts),
                    "max_tokens": args.max_tokens, "text": str(args.text), "windows": args.windows, "types": {}}
    for name, path in paths.items():
        same = [a == b for a, b in zip(answers[name], answers["shipped"])]
        prefix = [shared_prefix(a, b) / max(1, len(b)) for a, b in zip(answers[name], answers["shipped"])]
        report["types"][name] = {"size_mib": round(path.stat().st_size / 2**20, 1),
                                 "identical_answers": sum(same), "shared_prefix": round(statistics.mean(prefix), 3),
                                 "perplexity": perplexity(path, text, args.windows)}
        print(json.dumps({name: report["types"][name]}), file=sys.stderr, flush=True)
    if args.speed:
        for name, figures in speeds(paths, args.reps).items():
            report["types"][name].update(figures)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
