"""The built-in model's trained EAGLE-3 head (``installers/eagle3_training``): acceptance and speed on
prompts whose subjects its training never saw.

1. **Acceptance**, greedy, every round drafting the full length (``FullChains``) at draft lengths
   1..4: accepted / drafted (at length 1, how often the first guess is right) and accepted tokens per
   round; every drafted answer is checked against plain decoding.
2. **Speed**, greedy: plain decoding, the head kept on at ``--draft-max``, and under ``auto`` (the
   policy a user gets), alternating the order each rep; the decode rate without the first token, the
   median over ``--reps``, summed over the prompts. Each mode's verify cost is the ratio of its mean
   round's time to a plain step's, and the break-even acceptance is what a round would have to
   accept for the head to pay at that cost.

Prints one JSON object. Usage: ``python tests/bench/bench_eagle3_smollm2.py --head PATH [--prompts 24]
[--tokens 96] [--reps 3] [--draft-max 3]``.
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
sys.path.insert(0, str(ROOT / "installers" / "eagle3_training"))

from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from engine.decoding.sampling import GREEDY  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.protocol.draft_choice import parse_draft_spec  # noqa: E402
from engine.speculative.drafting import Drafting  # noqa: E402
from prompts import held_out_prompts  # noqa: E402
from tests.helpers.eagle3_acceptance import acceptance, prompt_tokens  # noqa: E402


def speed(head: Path, prompts: list[str], tokens: int, reps: int, draft_max: int) -> dict:
    session = open_session(str(resolve_model_ref("default")), n_ctx=2048, draft_max=draft_max)
    drafting = Drafting(session)
    try:
        kept, _ = drafting.plan(parse_draft_spec(f"eagle3:{head}"), draft_max, auto_off=False)
        auto, _ = drafting.plan(parse_draft_spec(f"eagle3:{head}"), draft_max, auto_off=True)
        makers = {"plain": None, "kept": kept, "auto": auto}
        seconds = {mode: [] for mode in makers}
        written = {mode: [] for mode in makers}
        rounds = {"kept": [0, 0]}  # rounds, accepted
        identical = True
        encoded = [prompt_tokens(session, p, chat=True) for p in prompts]
        for rep in range(reps):
            for mode in ("plain", "kept", "auto") if rep % 2 == 0 else ("auto", "kept", "plain"):
                total_s, total_n = 0.0, 0
                for i, prompt in enumerate(encoded):
                    run = Generation(session, prompt, GenerationSettings(GREEDY, max_tokens=tokens),
                                     make_source=makers[mode])
                    list(run)
                    t = run.timings
                    total_s += (t.gen_ms - (t.ttft_ms - t.prompt_ms)) / 1000
                    total_n += t.gen_n - 1
                    if mode == "plain" and rep == 0:
                        written["plain"].append(run.token_ids)
                    elif mode != "plain" and written["plain"]:
                        identical &= run.token_ids == written["plain"][i]
                    if mode == "kept":
                        s = run.source.stats
                        rounds["kept"][0] += s.rounds
                        rounds["kept"][1] += s.accepted
                seconds[mode].append(total_n / total_s)
        rate = {mode: statistics.median(v) for mode, v in seconds.items()}
        accepted_per_round = rounds["kept"][1] / max(1, rounds["kept"][0])
        # a kept round writes accepted + 1 tokens: its cost in plain steps follows from the two rates
        verify_cost = (accepted_per_round + 1) * rate["plain"] / rate["kept"]
        return {"plain_tok_s": round(rate["plain"], 1), "kept_speedup": round(rate["kept"] / rate["plain"], 3),
                "auto_speedup": round(rate["auto"] / rate["plain"], 3), "identical_output": identical,
                "kept_accepted_per_round": round(accepted_per_round, 3),
                "round_cost_in_plain_steps": round(verify_cost, 3),
                "accepted_per_round_to_break_even": round(verify_cost - 1, 3)}
    finally:
        drafting.close()
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--head", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--draft-max", type=int, default=3)
    parser.add_argument("--skip-acceptance", action="store_true")
    args = parser.parse_args()
    prompts = held_out_prompts(args.prompts)
    started = time.monotonic()
    report: dict = {"bench": "eagle3_smollm2", "head": args.head.name, "prompts": len(prompts), "tokens": args.tokens}
    if not args.skip_acceptance:
        report["acceptance"] = acceptance(resolve_model_ref("default"), args.head, prompts, args.tokens, chat=True)
    report["speed"] = speed(args.head, prompts[: max(4, len(prompts) // 3)], args.tokens, args.reps, args.draft_max)
    report["seconds"] = round(time.monotonic() - started)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
