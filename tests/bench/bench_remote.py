"""Hearth's added latency as a remote-engine client, over the raw ``openai`` client, on one server.

One ``llama_cpp.server`` (llama-cpp-python's OpenAI-compatible server, tests/helpers/llama_server.py)
runs SmolLM2 on 127.0.0.1. Each round sends the same streaming chat request twice, once through the
``openai`` client and once through Hearth's :class:`~app.engine_clients.remote.client.RemoteClient` (which of the
two goes first alternates by round): one user message, greedy (temperature 0), the same
``top_p`` and ``max_tokens``, usage asked for. The body Hearth sends is the same as the raw one, so
the server does the same work; what differs is the client.

Both are timed the same way, here, as a caller sees them: TTFT from sending the request to the first
piece of text arriving (a content chunk; a ``TokenDelta``), decode speed as the pieces after the first
divided by the time from the first to the last (``llama_cpp.server`` sends one chunk per token).
Hearth's figure includes its whole path: the command queue, the HTTP stream, parsing, the event queue.

Prints one JSON object (progress on stderr): the medians of each, ``ttft_overhead_ms`` (the median of
the paired differences Hearth − raw), ``decode_ratio`` (the median of the paired ratios Hearth / raw),
whether the greedy answers were equal, and the goals (TTFT overhead ≤ 10 ms, decode ≥ 0.98×).
``python tests/bench/bench_remote.py [--rounds 20] [--max-tokens 64] [--threads N] [--pause 0.5]``.
The clients run in this process, beside the server's threads: on a machine with few cores,
``--threads`` below the core count leaves them one, so neither client's own work slows the server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine import protocol as p  # noqa: E402
from engine.backends.base import default_threads  # noqa: E402
from app.engine_clients.client import EngineDead, new_request_id  # noqa: E402
from app.engine_clients.remote.client import RemoteClient  # noqa: E402
from app.engine_clients.remote.spec import RemoteEngine  # noqa: E402
from tests.helpers.llama_server import LlamaServer, llama_server, pin_cpu_build  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and the ships she guides home."
SAMPLING = p.SamplingSpec(temperature=0)  # greedy; the raw client sends the same top_p
GOALS = {"ttft_overhead_ms_max": 10.0, "decode_ratio_min": 0.98}


@dataclass
class Timed:
    text: str
    ttft_ms: float
    decode_tok_s: float | None  # None with fewer than two pieces


def timed(sent: float, arrivals: list[float], pieces: list[str]) -> Timed:
    span = arrivals[-1] - arrivals[0] if arrivals else 0.0
    speed = (len(arrivals) - 1) / span if len(arrivals) > 1 and span > 0 else None
    ttft = (arrivals[0] - sent) * 1000 if arrivals else float("nan")
    return Timed("".join(pieces), ttft, speed)


def raw_request(client: openai.OpenAI, model: str, max_tokens: int) -> Timed:
    arrivals: list[float] = []
    pieces: list[str] = []
    sent = time.perf_counter()
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}],
                                            max_tokens=max_tokens, temperature=SAMPLING.temperature,
                                            top_p=SAMPLING.top_p, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        content = chunk.choices[0].delta.content if chunk.choices else None
        if content:
            arrivals.append(time.perf_counter())
            pieces.append(content)
    return timed(sent, arrivals, pieces)


def hearth_request(client: RemoteClient, max_tokens: int) -> Timed:
    arrivals: list[float] = []
    pieces: list[str] = []
    command = p.Chat(request_id=new_request_id("bench"), messages=[p.WireMessage("user", PROMPT)], sampling=SAMPLING,
                     max_tokens=max_tokens)
    sent = time.perf_counter()
    for event in client.stream(command, timeout=600):
        if isinstance(event, p.TokenDelta) and event.text:
            arrivals.append(time.perf_counter())
            pieces.append(event.text)
        elif isinstance(event, (p.Error, EngineDead)):
            raise SystemExit(f"Hearth's remote client failed: {event.message}")
    return timed(sent, arrivals, pieces)


def run_rounds(server: LlamaServer, rounds: int, max_tokens: int, pause: float) -> dict[str, list[Timed]]:
    raw = openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=600)
    hearth = RemoteClient(RemoteEngine(name="bench", url=server.base_url, model=server.model))
    hearth.start()
    hearth.load_model("engine:bench")
    runners = {"raw": lambda: raw_request(raw, server.model, max_tokens),
               "hearth": lambda: hearth_request(hearth, max_tokens)}
    results: dict[str, list[Timed]] = {"raw": [], "hearth": []}
    try:
        for run in runners.values():  # warm-up: connections, imports, the server's first request
            run()
        for index in range(rounds):
            order = ["raw", "hearth"] if index % 2 == 0 else ["hearth", "raw"]
            for name in order:
                time.sleep(pause)  # ggml's threads spin a while after a request; let them settle
                results[name].append(runners[name]())
            row = {name: {"ttft_ms": round(results[name][-1].ttft_ms, 2),
                          "tok_s": round(results[name][-1].decode_tok_s or 0, 1)} for name in order}
            print(json.dumps({"round": index, **row}), file=sys.stderr)
    finally:
        hearth.close()
        raw.close()
    return results


def summary(results: dict[str, list[Timed]]) -> dict:
    raw, hearth = results["raw"], results["hearth"]
    ttft_diffs = [h.ttft_ms - r.ttft_ms for r, h in zip(raw, hearth)]
    ratios = [h.decode_tok_s / r.decode_tok_s for r, h in zip(raw, hearth) if h.decode_tok_s and r.decode_tok_s]

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values), 3) if values else None

    overhead, ratio = median(ttft_diffs), median(ratios)
    return {
        "raw": {"ttft_ms": median([r.ttft_ms for r in raw]),
                "decode_tok_s": median([r.decode_tok_s for r in raw if r.decode_tok_s])},
        "hearth": {"ttft_ms": median([h.ttft_ms for h in hearth]),
                   "decode_tok_s": median([h.decode_tok_s for h in hearth if h.decode_tok_s])},
        "ttft_overhead_ms": overhead, "decode_ratio": ratio,
        "same_answers": sum(r.text == h.text for r, h in zip(raw, hearth)), "rounds": len(raw),
        "goals": GOALS,
        "met": {"ttft": overhead is not None and overhead <= GOALS["ttft_overhead_ms_max"],
                "decode": ratio is not None and ratio >= GOALS["decode_ratio_min"]},
        "paired_ttft_diffs_ms": [round(d, 2) for d in ttft_diffs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between requests")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-remote-") as work:
        variant = pin_cpu_build(Path(work))
        with llama_server(context=args.context, threads=args.threads, log_dir=Path(work)) as server:
            results = run_rounds(server, args.rounds, args.max_tokens, args.pause)
    print(json.dumps({"bench": "remote", "server": "llama_cpp.server", "model": Path(server.model).name,
                      "cpu_build": variant, "threads": args.threads, "max_tokens": args.max_tokens,
                      **summary(results)}, indent=2))


if __name__ == "__main__":
    main()
