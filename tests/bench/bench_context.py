"""Long context: how many tokens a memory budget holds, hybrid against transformer (issue 19).

For ``hybrid-bench`` (qwen35: 3 Gated DeltaNet layers to 1 attention layer) and ``transformer-bench``
(every layer attention; a similar size), the largest context that loads within ``--budget-mib`` is
found by actually loading it: each candidate is loaded in a fresh worker process, which reads one
512-token batch, and fits when the worker's resident memory is within the budget (a binary search
in steps of ``--step`` tokens). Reported: both contexts, their ratio, the ratio the estimate
predicts (engine.context.context_memory, the same budget) and the ratio of attention bytes per token (what
the architecture predicts for the cache alone). Then, at the hybrid's largest context, prefill
throughput over the first and the last ``--window`` tokens of the context and decode tok/s right
after the start and at the end (``--fill`` caps how much is read, for a quick run).

A 64k-token document with the automatic context is ``tests/bench/bench_documents.py --lengths 65536``
(peak resident memory against the estimate, the second question's time to first token against the
read). Prints one JSON object.

Usage: ``python tests/bench/bench_context.py [--budget-mib 1024] [--step 2048] [--fill 0]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import psutil  # noqa: E402

from engine import protocol as p  # noqa: E402
from app.engine_clients.client import new_request_id  # noqa: E402
from engine.context.context_memory import model_memory  # noqa: E402
from engine.models.model_files import check_model_file  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from model_store.fit import longest_context  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

MODELS = ("hybrid-bench", "transformer-bench")
MiB = 1 << 20


def resident_after_load(model: Path, n_ctx: int) -> int:
    """Bytes a fresh worker holds with ``model`` at ``n_ctx`` tokens, after one 512-token batch."""
    client = ProcessClient()
    client.start()
    try:
        client.send(p.SetTelemetry(interval_ms=0))
        client.load_model(str(model), n_ctx=n_ctx, draft_max=0)
        prompt = " ".join(f"w{i % 97}" for i in range(400))
        list(client.stream(p.Complete(request_id=new_request_id("b"), prompt=prompt, max_tokens=1,
                                      sampling=p.SamplingSpec(temperature=0), draft=p.DraftSpec("off"))))
        return psutil.Process(client.process.pid).memory_info().rss
    finally:
        client.close(mode="abort")


def largest_loading(model: Path, budget: int, step: int, high: int) -> tuple[int, int]:
    """(the largest context, a multiple of ``step``, whose worker stays within ``budget``; its RSS)."""
    low, best_rss = 0, 0
    high //= step
    while low < high:
        middle = (low + high + 1) // 2
        rss = resident_after_load(model, middle * step)
        print(f"{model.stem}: {middle * step} tokens -> {rss / MiB:.0f} MiB", file=sys.stderr)
        if rss <= budget:
            low, best_rss = middle, rss
        else:
            high = middle - 1
    return low * step, best_rss


def predicted_longest(model: Path, budget: int) -> int:
    memory = model_memory(model, check_model_file(model))
    return longest_context(lambda n: memory.total_bytes(n), budget, 1 << 24)


def kv_per_token(model: Path) -> int:
    return model_memory(model, check_model_file(model)).kv_bytes(1)


def speeds_across_the_context(model: Path, n_ctx: int, window: int, fill: int) -> dict:
    """Prefill tok/s over the first and the last ``window`` tokens read, decode tok/s after each."""
    session = open_session(str(model), n_ctx=n_ctx)
    vocab = session.facts.n_vocab
    rng = np.random.default_rng(0)
    end = min(n_ctx - 64, fill or n_ctx)
    tokens = rng.integers(10, vocab - 10, size=end).tolist()
    try:
        first = _timed_feed(session, tokens[:window])
        decode_start = _decode_rate(session)
        session.reset()
        session.feed(tokens[:end - window])  # most of the context, untimed
        last = _timed_feed(session, tokens[end - window:end])
        decode_end = _decode_rate(session)
    finally:
        session.close()
    return {"n_ctx": n_ctx, "filled_tokens": end, "prefill_tok_s_start": round(first, 1),
            "prefill_tok_s_end": round(last, 1), "prefill_end_over_start": round(last / first, 3),
            "decode_tok_s_start": round(decode_start, 1), "decode_tok_s_end": round(decode_end, 1),
            "decode_end_over_start": round(decode_end / decode_start, 3)}


def _timed_feed(session, tokens: list[int]) -> float:
    started = time.perf_counter()
    session.feed(tokens)
    return len(tokens) / (time.perf_counter() - started)


def _decode_rate(session, n: int = 32) -> float:
    """Greedy tokens per second, one at a time (the state is left as it was read plus these)."""
    started = time.perf_counter()
    for _ in range(n):
        session.feed([int(np.argmax(session.last_logits()))])
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-mib", type=int, default=1024)
    parser.add_argument("--step", type=int, default=2048)
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--fill", type=int, default=0, help="read at most this many tokens (0: the whole context)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hearth-bench-models")
    args = parser.parse_args()
    budget = args.budget_mib * MiB
    paths = make_models(args.cache, MODELS)
    result: dict = {"bench": "context", "budget_mib": args.budget_mib, "models": {}}
    for name, path in paths.items():
        predicted = predicted_longest(path, budget)
        found, rss = largest_loading(path, budget, args.step, high=2 * predicted + args.step)
        result["models"][name] = {"largest_context": found, "rss_mib": round(rss / MiB, 1),
                                  "estimated_largest_context": predicted, "kv_bytes_per_token": kv_per_token(path)}
    hybrid, transformer = (result["models"][m] for m in MODELS)
    result["ratio"] = round(hybrid["largest_context"] / max(1, transformer["largest_context"]), 3)
    result["estimated_ratio"] = round(hybrid["estimated_largest_context"] /
                                      max(1, transformer["estimated_largest_context"]), 3)
    result["kv_per_token_ratio"] = round(transformer["kv_bytes_per_token"] / hybrid["kv_bytes_per_token"], 3)
    result["hybrid_at_its_largest"] = speeds_across_the_context(paths["hybrid-bench"], hybrid["largest_context"],
                                                                args.window, args.fill)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
