"""``hearth serve`` against llama-cpp-python's own OpenAI server (``llama_cpp.server``), or with
``--against llama-server`` against llama.cpp's C++ server, side by side.

``--against llama-server`` builds llama.cpp's ``llama-server`` once from the source Hearth vendors,
stock, for the CPU variant Hearth's canary chose (tests/helpers/cpp_server.py), and runs it with one
slot, flash attention on and the GGUF's own template (``--jinja``). Its per-turn ``read_tokens`` are
its own count of the tokens it read (``timings.prompt_n``), Hearth's its prompt less the reused ones.

Both servers run at once on 127.0.0.1 with the same model file, context, batch size, threads and CPU
build of llama.cpp (Hearth's llama-cpp-python has no CPU backend linked in, so ``llama_cpp.server``
is started by tests/helpers/llama_server.py, which first loads the build Hearth's canary chose, and
runs it with flash attention on and ``logits_all`` off, as Hearth runs). Both render the GGUF's own
chat template into the same tokens; both get a system message, so neither template adds a default one.

Per model (``smollm2``, ``hybrid-bench``):

* a conversation replayed as clients do: every request carries all the messages so far, with that
  server's own earlier answers as it returned them (so the two histories differ where the answers
  do). Each user message is deterministic filler, as many words as make ``--history-tokens`` in all
  at the last turn (6600: about 7k tokens of prompt); each answer is at most ``--answer-tokens``
  greedy tokens. Per turn: time to first token as the client sees it (a streaming request, from
  sending to the first content chunk), which server goes first alternating; the prompt tokens and
  the reused ones (``cached_tokens``) Hearth reports. ``llama_cpp.server`` reports no usage when
  streaming, so both servers' counts of the last turn's prompt are asked afterwards, not streamed.
* per request, ``<server>_others_cores``: other programs' average busy cores while it ran
  (tests/helpers/cpu_use.py), so a contended turn shows;
* prompt reading (``prefill_tok_s``): a new conversation of about ``--prefill-tokens``, one answer
  token; its prompt tokens over the time to the first token, alternating, ``--reps``;
* single-request decode speed: a fresh short prompt, ``--decode-tokens`` greedy tokens, streamed;
  tokens after the first chunk divided by the time from the first chunk to the last (Hearth's count
  from its usage, ``llama_cpp.server``'s its content chunks: one per token), alternating, ``--reps``.

Prints one JSON object (progress on stderr). Run ``.venv/bin/pip install -e '.[bench]'`` first, then
``python tests/bench/bench_serve.py [--models smollm2,hybrid-bench] [--turns 12] [--decode-tokens 128]
[--reps 3] [--threads N] [--context 8192] [--history-tokens 6600] [--first-share 0] [--draft auto]
[--against llama-cpp-python|llama-server] [--prefill-tokens 2000]``.
``--first-share 0.5`` puts half of the history in the first message (a pasted document, an agent's
instructions) and spreads the rest: later messages are shorter, as in many real conversations. ``--threads``
below the cores this process may use pins both servers to that many (Hearth runs one thread per
core it may use). ``--draft`` is ``hearth serve``'s (default: Hearth's own, speculative decoding
where it helps); ``--draft off`` compares plain decoding.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends.base import default_threads  # noqa: E402
from engine.protocol import DEFAULTS  # noqa: E402
from model_store.installed import embedded_model_file  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402
from tests.bench.serve_servers import Server, count_tokens, prompt_tokens, start_baseline, start_hearth, stream_chat  # noqa: E402
from tests.helpers.cpp_server import built_server  # noqa: E402
from tests.helpers.llama_server import pin_cpu_build  # noqa: E402

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
WORDS = ("river stone light house garden winter market letter window music paper forest bridge candle "
         "morning harbor orchard valley meadow lantern").split()
DECODE_PROMPT = "Write a long story about a lighthouse keeper and the ships she guides home."
# Between requests: ggml's OpenMP threads spin for a while after their work, so a request sent at
# once to the other server would share the cores with the first one's spinning threads.
PAUSE_S = 1.0


def user_message(turn: int, words: int) -> str:
    rng = random.Random(turn)
    paragraphs = [" ".join(rng.choice(WORDS) for _ in range(words // 4)).capitalize() + "." for _ in range(4)]
    return "\n\n".join(paragraphs) + f"\n\nThis is note {turn}. Which word appears most often above?"


def alternating(servers: list[Server], index: int) -> list[Server]:
    return servers if index % 2 == 0 else servers[::-1]


def message_words(turn: int, turns: int, total: int, first_share: float) -> int:
    """Words of the user message of ``turn`` (from 1): ``first_share`` of ``total`` in the first
    (a pasted document, an agent's long instructions), the rest spread evenly; 0 spreads all evenly."""
    if first_share <= 0 or turns == 1:
        return max(8, round(total / turns))
    if turn == 1:
        return max(8, round(total * first_share))
    return max(8, round(total * (1 - first_share) / (turns - 1)))


def conversation(servers: list[Server], turns: int, total_words: int, first_share: float,
                 answer_tokens: int) -> tuple[list[dict], dict]:
    histories = {s.name: [{"role": "system", "content": SYSTEM}] for s in servers}
    rows = []
    for turn in range(1, turns + 1):
        row = {"turn": turn}
        words = message_words(turn, turns, total_words, first_share)
        for server in alternating(servers, turn):
            history = histories[server.name]
            history.append({"role": "user", "content": user_message(turn, words)})
            time.sleep(PAUSE_S)
            reply = stream_chat(server, history, answer_tokens)
            history.append({"role": "assistant", "content": reply.text})
            row[f"{server.name}_ttft_ms"] = round(reply.ttft_ms, 1)
            row[f"{server.name}_read_tokens"] = reply.tokens_read(server)
            row[f"{server.name}_others_cores"] = reply.others_cores
            if server.name == "hearth":
                row["prompt_tokens"] = reply.usage.get("prompt_tokens")
                row["hearth_cached_tokens"] = (reply.usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return rows, histories


def last_prompt_tokens(servers: list[Server], histories: dict) -> dict:
    """Each server's count of the last turn's prompt (its history without its last answer)."""
    return {server.name: prompt_tokens(server, histories[server.name][:-1]) for server in servers}


def decode_speed(servers: list[Server], n_tokens: int, reps: int) -> dict:
    speeds: dict[str, list[float]] = {s.name: [] for s in servers}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": DECODE_PROMPT}]
    for rep in range(reps):
        for server in alternating(servers, rep):
            time.sleep(PAUSE_S)
            reply = stream_chat(server, messages, n_tokens)
            tokens = reply.usage.get("completion_tokens") if server.name != "llama_server" else reply.chunks
            if tokens and tokens > 1 and reply.decode_s > 0:
                speeds[server.name].append((tokens - 1) / reply.decode_s)
            print(json.dumps({"decode": server.name, "rep": rep, "tokens": tokens,
                              "seconds": round(reply.decode_s, 3)}), file=sys.stderr)
    return with_ratio(speeds, servers)


def with_ratio(speeds: dict[str, list[float]], servers: list[Server]) -> dict:
    """Medians per server, and Hearth's over the baseline's (``ratio``)."""
    median = {name: round(statistics.median(values), 1) if values else None for name, values in speeds.items()}
    hearth, baseline = median["hearth"], median[servers[1].name]
    ratio = hearth / baseline if hearth and baseline else None
    return {**median, "ratio": round(ratio, 3) if ratio else None, "all": speeds}


def prefill_speed(servers: list[Server], words: int, reps: int) -> dict:
    """Prompt reading: a new conversation of about ``--prefill-tokens`` (no earlier state to stand on),
    one answer token; its prompt tokens over the time to the first token, as the client sees it."""
    speeds: dict[str, list[float]] = {s.name: [] for s in servers}
    for rep in range(reps):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_message(1000 + rep, words)}]
        for server in alternating(servers, rep):
            time.sleep(PAUSE_S)
            reply = stream_chat(server, messages, 1)
            tokens = reply.usage.get("prompt_tokens") or prompt_tokens(server, messages)
            speeds[server.name].append(round(tokens / (reply.ttft_ms / 1000), 1))
            print(json.dumps({"prefill": server.name, "rep": rep, "tokens": tokens, "ttft_ms": round(reply.ttft_ms),
                              "others_cores": reply.others_cores}), file=sys.stderr)
    return with_ratio(speeds, servers)


def bench_model(ref: str, path: Path, args: argparse.Namespace, cpus: list[int] | None, home: Path) -> dict:
    servers = []
    try:
        servers.append(start_hearth(ref, args.context, args.draft, home, cpus))
        servers.append(start_baseline(path, args, home, cpus))
        per_word = count_tokens(servers[1], user_message(0, 400)) / 400
        words = round(args.history_tokens / per_word)
        turns, histories = conversation(servers, args.turns, words, args.first_share, args.answer_tokens)
        counted = last_prompt_tokens(servers, histories)
        decode = decode_speed(servers, args.decode_tokens, args.reps)
        prefill = prefill_speed(servers, round(args.prefill_tokens / per_word), args.reps)
    finally:
        for server in servers:
            server.stop()
    last, baseline = turns[-1], servers[1].name
    ratio = last[f"{baseline}_ttft_ms"] / last["hearth_ttft_ms"] if last["hearth_ttft_ms"] else None
    continued = [t[f"{baseline}_ttft_ms"] / t["hearth_ttft_ms"] for t in turns[1:] if t["hearth_ttft_ms"]]
    return {"turns": turns, "last_turn_prompt_tokens": counted,
            "last_turn_ttft_ratio": round(ratio, 2) if ratio else None,
            "continued_ttft_ratio_median": round(statistics.median(continued), 2) if continued else None,
            "decode_tok_s": decode, "prefill_tok_s": prefill, "history_words": words, "first_share": args.first_share}


def model_files(wanted: list[str], cache: Path) -> dict[str, tuple[str, Path]]:
    """name -> (what ``hearth serve --model`` takes, the GGUF file)."""
    files = {"smollm2": ("default", embedded_model_file())}
    generated = [name for name in wanted if name != "smollm2"]
    if generated:
        files.update({name: (str(path), path) for name, path in make_models(cache, generated).items()})
    return {name: files[name] for name in wanted}


def per_model(args: argparse.Namespace, prefix: str, bench: Callable[[str, Path, Path], dict]) -> tuple[str, dict]:
    """Pin Hearth's CPU build (and build llama-server on it when it is the baseline), then
    ``bench(ref, path, folder)`` for each of ``--models`` in a folder of its own; (build, results)."""
    wanted = args.models.split(",")
    files = model_files(wanted, args.cache)
    results = {}
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        home = Path(work)
        variant = pin_cpu_build(home)
        if args.against == "llama-server":
            args.cpp_server = built_server(variant)
        for name in wanted:
            ref, path = files[name]
            (home / name).mkdir()
            results[name] = bench(ref, path, home / name)
    return variant, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2,hybrid-bench")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--history-tokens", type=int, default=6600,
                        help="about how many tokens the user messages add up to at the last turn")
    parser.add_argument("--first-share", type=float, default=0.0,
                        help="share of the history in the first user message (a pasted document); 0: even")
    parser.add_argument("--answer-tokens", type=int, default=16)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--draft", default=DEFAULTS.draft, help="hearth serve's --draft (off: no speculative decoding)")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--against", choices=("llama-cpp-python", "llama-server"), default="llama-cpp-python",
                        help="the baseline: llama_cpp.server, or llama.cpp's C++ llama-server (built once, cached)")
    parser.add_argument("--prefill-tokens", type=int, default=2000, help="the prompt of the prompt-reading test")
    args = parser.parse_args()
    available = sorted(os.sched_getaffinity(0))
    cpus = available[:args.threads] if args.threads < len(available) else None
    variant, results = per_model(args, "hearth-bench-serve-",
                                 lambda ref, path, home: bench_model(ref, path, args, cpus, home))
    print(json.dumps({"bench": "serve", "against": args.against, "cpu_build": variant, "threads": args.threads, "context": args.context,
                      "hearth_draft": args.draft, "turns": args.turns, "answer_tokens": args.answer_tokens,
                      "models": results}, indent=2))


if __name__ == "__main__":
    main()
