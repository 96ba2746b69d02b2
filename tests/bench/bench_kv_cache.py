"""The 8-bit KV cache (q8_0 K and V) against the default f16 one: memory, speed and greedy agreement.

For each model, side by side in one process (the machine is shared and noisy, so the two cache types
alternate, ``--reps`` times): prefill tok/s over a ``--prompt``-token input and decode tok/s over
``--tokens`` greedy tokens after it, at a context of ``--n-ctx``; then greedy agreement: on
``--prompts`` prompts, the share of answers identical token for token and the mean length of the
common beginning (as a fraction of the answer). Also the attention cache's bytes per token of each
type (engine.context.context_memory). Prints one JSON object.

Usage: ``python tests/bench/bench_kv_cache.py [--models smollm2,hybrid-bench,transformer-bench]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from engine.context.context_memory import model_memory  # noqa: E402
from engine.models.model_files import check_model_file, embedded_model_path  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

TYPES = ("f16", "q8_0")
SUBJECTS = ("a lighthouse", "the tide", "a winter market", "an old bridge", "the river", "a letter", "bread",
            "a forest path", "the harbour", "a lantern", "music at night", "a garden", "paper boats", "a candle",
            "morning fog", "an orchard")


def model_paths(names: list[str], cache: Path) -> dict[str, Path]:
    fixtures = [n for n in names if n != "smollm2"]
    paths = make_models(cache, fixtures) if fixtures else {}
    return {n: embedded_model_path() if n == "smollm2" else paths[n] for n in names}


def greedy(session, prompt: list[int], n: int) -> tuple[list[int], float]:
    """(``n`` greedy tokens after ``prompt``, decode tok/s)."""
    session.reset()
    session.feed(prompt)
    out, started = [], time.perf_counter()
    for _ in range(n):
        token = int(np.argmax(session.last_logits()))
        out.append(token)
        session.feed([token])
    return out, n / (time.perf_counter() - started)


def speeds(path: Path, kv_type: str, n_ctx: int, prompt: list[int], tokens: int) -> tuple[float, float]:
    session = open_session(str(path), n_ctx=n_ctx, kv_type=kv_type)
    try:
        started = time.perf_counter()
        session.feed(prompt)
        prefill = len(prompt) / (time.perf_counter() - started)
        _, decode = greedy(session, prompt[:8], tokens)
        return prefill, decode
    finally:
        session.close()


def agreement(path: Path, n_ctx: int, prompts: int, tokens: int) -> dict:
    answers: dict[str, list[list[int]]] = {}
    for kv_type in TYPES:
        session = open_session(str(path), n_ctx=n_ctx, kv_type=kv_type)
        try:
            answers[kv_type] = [greedy(session, raw_prompt_tokens(session.model, f"A short story about {s}:"),
                                       tokens)[0] for s in SUBJECTS[:prompts]]
        finally:
            session.close()
    common = [_common_prefix(a, b) / tokens for a, b in zip(*answers.values())]
    identical = sum(a == b for a, b in zip(*answers.values()))
    return {"prompts": prompts, "identical": identical, "identical_share": round(identical / prompts, 3),
            "mean_common_prefix_share": round(statistics.mean(common), 3)}


def _common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def bench_model(path: Path, args: argparse.Namespace) -> dict:
    session = open_session(str(path), n_ctx=512)
    vocab = session.facts.n_vocab
    session.close()
    prompt = np.random.default_rng(1).integers(10, vocab - 10, size=args.prompt).tolist()
    runs: dict[str, dict[str, list[float]]] = {t: {"prefill": [], "decode": []} for t in TYPES}
    for _ in range(args.reps):
        for kv_type in TYPES:
            prefill, decode = speeds(path, kv_type, args.n_ctx, prompt, args.tokens)
            runs[kv_type]["prefill"].append(prefill)
            runs[kv_type]["decode"].append(decode)
    median = {t: {k: statistics.median(v) for k, v in r.items()} for t, r in runs.items()}
    memory = model_memory(path, check_model_file(path))
    return {
        "kv_bytes_per_token": {t: memory.kv_bytes(1 << 20, t) >> 20 for t in TYPES},
        "prefill_tok_s": {t: round(median[t]["prefill"], 1) for t in TYPES},
        "decode_tok_s": {t: round(median[t]["decode"], 1) for t in TYPES},
        "q8_over_f16_prefill": round(median["q8_0"]["prefill"] / median["f16"]["prefill"], 3),
        "q8_over_f16_decode": round(median["q8_0"]["decode"] / median["f16"]["decode"], 3),
        "greedy_agreement": agreement(path, args.n_ctx, args.prompts, args.answer_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="smollm2,hybrid-bench,transformer-bench")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--answer-tokens", type=int, default=48)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hearth-bench-models")
    args = parser.parse_args()
    result = {"bench": "kv_cache", "n_ctx": args.n_ctx, "models": {}}
    for name, path in model_paths(args.models.split(","), args.cache).items():
        result["models"][name] = bench_model(path, args)
        print(json.dumps({name: result["models"][name]}), file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
