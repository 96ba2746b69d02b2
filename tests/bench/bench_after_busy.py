"""Reading a prompt just after another program stopped: Hearth's chosen thread count on a machine that
is idle now but was busy a moment ago (issue 35's thread budget that "looks at now").

For ``--rounds`` rounds, alternating which goes first, Hearth's session (loaded as the app loads it:
no thread count asked, so :class:`~engine.decoding.thread_budget.ThreadBudget` picks one per decode) reads
the same prompt of about ``--prompt-tokens`` tokens:

* ``idle``: after ``--busy-seconds`` of nothing;
* ``after_busy``: after ``--busy-seconds`` with one busy-loop process on one core that has then
  stopped, and ``--settle`` seconds of idling (the time a user takes to press Send is longer).

It reports the read speeds, the thread count each read used, and after_busy ÷ idle per round and
as the median. Goal: ≥ 0.9 (an idle machine gets every core, whatever ran before). A budget that
averages over the whole idle gap reads the after_busy prompt on one thread.
Prints one JSON object. Usage: ``python tests/bench/bench_after_busy.py [--model default|PATH]
[--rounds 4] [--prompt-tokens 1000] [--busy-seconds 4] [--settle 0.6]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.models.session import ModelSession, open_session  # noqa: E402
from tests.bench.bench_documents import make_document  # noqa: E402

SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def wait(seconds: float, *, busy: bool) -> None:
    """Let ``seconds`` pass, with one busy-loop process running through them when ``busy``."""
    if busy:
        subprocess.run([sys.executable, "-c", SPIN.format(seconds=seconds)], check=True)
    else:
        time.sleep(seconds)


def timed_read(session: ModelSession, tokens: list[int]) -> dict:
    threads: list[int] = []
    session.context.after_decode = lambda *_: threads.append(session.context.n_threads)
    session.reset()
    started = time.perf_counter()
    session.feed(tokens)
    seconds = time.perf_counter() - started
    session.context.after_decode = None
    return {"read_tok_s": len(tokens) / seconds, "threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--busy-seconds", type=float, default=4.0)
    parser.add_argument("--settle", type=float, default=0.6)
    args = parser.parse_args()
    session = open_session(args.model, n_ctx=args.prompt_tokens + 64)
    try:
        words = make_document(4000).text.split()
        tokens = raw_prompt_tokens(session.model, " ".join(words))[:args.prompt_tokens]
        timed_read(session, tokens[:64])  # warm up
        runs: dict[str, list[dict]] = {"idle": [], "after_busy": []}
        for round_ in range(args.rounds):
            order = ("idle", "after_busy") if round_ % 2 == 0 else ("after_busy", "idle")
            for case in order:
                wait(args.busy_seconds, busy=case == "after_busy")
                time.sleep(args.settle)
                runs[case].append(timed_read(session, tokens))
                print(f"round {round_} {case}: {runs[case][-1]}", file=sys.stderr)
    finally:
        session.close()
    ratios = [b["read_tok_s"] / a["read_tok_s"] for a, b in zip(runs["idle"], runs["after_busy"])]
    print(json.dumps({"model": args.model, "prompt_tokens": len(tokens), "busy_seconds": args.busy_seconds,
                      "settle_s": args.settle, "runs": runs, "after_busy_over_idle": ratios,
                      "median_after_busy_over_idle": statistics.median(ratios)}, indent=1))


if __name__ == "__main__":
    main()
