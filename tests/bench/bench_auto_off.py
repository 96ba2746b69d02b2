"""What ``auto`` costs when drafting loses: the time a request spends before auto-off switches a
losing drafter off, against plain decoding of the same tokens, measured alternately in one run.

For each case the bench runs one 160-token greedy request plain, one under ``auto`` as the first
answer after loading (``first``: the drafter's measured speeds forgotten), and one as a later answer
(``next``: the policy carried over from the previous answer, as in a conversation), ``--reps`` times
each in alternating order on one loaded model. Every step of a ``first`` request is timed by the
policy's mode then: ``draft`` (warm-up rounds), ``probe_plain`` (the plain probe), ``off`` (plain steps
after switching off). ``lost_ms`` is the draft rounds' time beyond what plain steps would have taken
for the tokens they gave (at the run's own plain step time), so it does not depend on the run-to-run
noise of the whole request's speed; ``lost_share`` is that over the plain request's time.
``first_speedup`` and ``next_speedup`` are whole-request speeds divided by plain, as
``bench_drafting.py`` reports them.
Prints one JSON object.
Usage: ``python tests/bench/bench_auto_off.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.decoding.sampling import GREEDY  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.speculative import token_sources  # noqa: E402
from engine.speculative.drafting import Drafting  # noqa: E402
from engine.protocol.draft_choice import parse_draft_spec  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

TOKENS = 160
PROMPT = "the lighthouse keeper wrote in the log that the storm"


class StepClock:
    """Times each step of a speculative source by the policy's mode when the step began."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float, int]] = []
        self._step = token_sources.SpeculativeSource.step

    def install(self) -> None:
        clock, step = self, self._step

        def timed(source, pending):
            mode, started = source.policy.mode, time.perf_counter()
            tokens = step(source, pending)
            clock.steps.append((mode, time.perf_counter() - started, len(tokens)))
            return tokens

        token_sources.SpeculativeSource.step = timed

    def by_mode(self) -> dict[str, dict]:
        modes: dict[str, dict] = {}
        for mode, seconds, tokens in self.steps:
            entry = modes.setdefault(mode, {"steps": 0, "ms": 0.0, "tokens": 0})
            entry["steps"], entry["ms"], entry["tokens"] = entry["steps"] + 1, entry["ms"] + seconds * 1000, \
                entry["tokens"] + tokens
        return modes


def request(session, tokens, make=None) -> tuple[float, float]:
    """(tokens per second after the first token, plain ms per step of that request)."""
    run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=TOKENS), make_source=make)
    for _ in run:
        pass
    t = run.timings
    decode_ms = t.gen_ms - (t.ttft_ms - t.prompt_ms)
    return (t.gen_n - 1) / (decode_ms / 1000), decode_ms / max(1, t.gen_n - 1)


def bench_case(name: str, model: Path, spec: str, paths: int, reps: int, clock: StepClock) -> dict:
    session = open_session(str(model), n_ctx=4096, draft_max=4, draft_width=paths)
    drafting = Drafting(session)
    auto, _ = drafting.plan(parse_draft_spec(spec), 4, auto_off=True)
    tokens = raw_prompt_tokens(session.model, PROMPT)
    request(session, tokens)  # warm-up
    request(session, tokens, auto)  # the drafter's one-off loading, and a policy for the first "next"
    rates, lost, plain_step = {"plain": [], "first": [], "next": []}, [], []
    for rep in range(reps):
        for mode in ("plain", "first", "next") if rep % 2 == 0 else ("next", "first", "plain"):
            clock.steps.clear()
            if mode == "first":
                drafting.forget_speeds()
            rate, step_ms = request(session, tokens, None if mode == "plain" else auto)
            rates[mode].append(rate)
            if mode == "plain":
                plain_step.append(step_ms)
            elif mode == "first":
                modes = clock.by_mode()
        draft = modes.get("draft", {"ms": 0.0, "tokens": 0})
        lost.append(draft["ms"] - draft["tokens"] * plain_step[-1])
    drafting.close()
    session.close()
    med = {mode: statistics.median(values) for mode, values in rates.items()}
    return {"case": name, "plain_tok_s": round(med["plain"], 1), "first_tok_s": round(med["first"], 1),
            "next_tok_s": round(med["next"], 1), "first_speedup": round(med["first"] / med["plain"], 3),
            "next_speedup": round(med["next"] / med["plain"], 3),
            "lost_ms": round(statistics.median(lost), 1),
            "lost_share": round(statistics.median(lost) / (TOKENS * statistics.median(plain_step)), 3),
            "first_steps": {mode: {"steps": e["steps"], "ms": round(e["ms"], 1), "tokens": e["tokens"]}
                            for mode, e in modes.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    paths = make_models(args.cache, ["hybrid-bench", "hybrid-bench-draft", "eagle3-bench-fitted"])
    hybrid, fitted = paths["hybrid-bench"], f"eagle3:{paths['eagle3-bench-fitted']}"
    draft_model = f"model:{paths['hybrid-bench-draft']}"
    cases = [("hybrid-bench + draft model", draft_model, 1), ("hybrid-bench + MTP head", "mtp", 1),
             ("hybrid-bench + fitted EAGLE-3 head", fitted, 1), ("hybrid-bench + draft model, tree", draft_model, 3),
             ("hybrid-bench + MTP head, tree", "mtp", 3), ("hybrid-bench + fitted EAGLE-3 head, tree", fitted, 3)]
    clock = StepClock()
    clock.install()
    results = []
    for name, spec, n_paths in cases:
        results.append(bench_case(name, hybrid, spec, n_paths, args.reps, clock))
        print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"bench": "auto_off", "reps": args.reps, "tokens": TOKENS, "results": results}, indent=2))


if __name__ == "__main__":
    main()
