"""Decode speed with speculative drafting divided by plain decoding, measured alternately in one run.

Cases: (1) SmolLM2 + prompt lookup on a document-grounded task (quote a given text); (2) the
hybrid bench model with its Q8_0 self-draft; (3) with a smaller draft model; (4) MTP; (5) an EAGLE-3
head fitted to the hybrid bench model (``eagle3-bench-fitted``); then the drafters that can give
several guesses again as a tree of 3 paths (``--draft-paths 3``), and SmolLM2 and the bench
transformer with random EAGLE-3 heads, chain and tree (what a head that guesses nothing costs). Each drafter runs twice: kept on
(``draft_auto_off=False``) to show what drafting itself does, and under the ``auto`` policy, which
must never lose more than 5%. Outputs are checked to be token-identical to plain decoding (greedy).

Each case also reports the verify cost of its batch shape (a chain of k+1 rows, or a tree of 3 paths
of k+1 rows each) relative to one token, from ``bench_tree_verify.pass_times`` on the same model, and
the ceiling that cost and the measured tokens per round imply for a free drafter:
``(mean accepted length + 1) / verify cost``, with how much of it the drafter reached.
Prints one JSON object.
Each case reports its per-rep speeds too (``reps_tok_s``): the auto runs' first rep pays the policy's
warm-up and a later one its re-try, so the median of 5 reps is the lowest of the other three; and
``auto_speedup_paired``, the median over reps of each rep's auto over plain (each run twice, mirrored
around the drafted run: :data:`PAIRED_ORDER`), with ``auto_rounds``, the rounds each auto run drafted.
Usage: ``python tests/bench/bench_drafting.py [--reps N] [--cases SUBSTRING,...]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.templates.chat_template import ChatMessage  # noqa: E402
from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.templates.prompts import chat_prompt_tokens, raw_prompt_tokens  # noqa: E402
from engine.decoding.sampling import GREEDY  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.speculative.drafting import Drafting  # noqa: E402
from engine.protocol.draft_choice import DraftRefused, parse_draft_spec  # noqa: E402
from tests.bench.bench_tree_verify import pass_times  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

TREE_PATHS = 3
# Each rep runs plain and auto twice, mirrored around the drafted run (A B drafted B A): a drift of this
# virtual machine's speed during the rep then meets plain and auto alike (it moved 70-105 tok/s within
# one run, and a rep of sequential runs alone ranged 0.82-1.18).
PAIRED_ORDER = (("plain", "auto", "drafted", "auto", "plain"), ("auto", "plain", "drafted", "plain", "auto"))
DOCUMENT = (
    "The lighthouse at Port Ellen was built in 1832 to guide ships through the narrow channel between "
    "the island and the mainland. Its keeper, Margaret Hale, kept a daily log of the weather, the ships "
    "that passed and the state of the lamp. In the winter of 1847 a storm destroyed the jetty and cut the "
    "island off for eleven days; the log records that the lamp was never allowed to go dark. The tower "
    "was automated in 1961 and is now a small museum that keeps the original lens and the keeper's log."
)


def decode_rate(session, tokens, max_tokens, make=None) -> tuple[float, Generation]:
    run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=max_tokens), make_source=make)
    for _ in run:
        pass
    t = run.timings
    return (t.gen_n - 1) / ((t.gen_ms - (t.ttft_ms - t.prompt_ms)) / 1000), run


def bench_case(name, model, tokens, spec, reps, max_tokens, draft_max=4, paths=1) -> dict:
    session = open_session(str(model), n_ctx=4096, draft_max=draft_max, draft_width=paths)
    drafting = Drafting(session)
    try:
        kept, _ = drafting.plan(parse_draft_spec(spec), draft_max, auto_off=False)
        auto, _ = drafting.plan(parse_draft_spec(spec), draft_max, auto_off=True)
    except DraftRefused as exc:
        session.close()
        return {"case": name, "drafter": spec, "available": False, "reason": str(exc)}
    rates = {"plain": [], "drafted": [], "auto": []}
    paired, auto_rounds = [], []
    stats, identical = None, True
    decode_rate(session, tokens, 16)  # warm-up
    for rep in range(reps):
        rep_rates = {"plain": [], "auto": []}
        for mode in PAIRED_ORDER[rep % 2]:
            rate, run = decode_rate(session, tokens, max_tokens, {"plain": None, "drafted": kept, "auto": auto}[mode])
            if mode == "plain":
                reference = run.token_ids
            elif mode == "drafted":
                stats, drafted_ids = run.source.stats, run.token_ids
            else:
                auto_stats = run.source.stats
                auto_rounds.append(auto_stats.rounds)
            rates[mode].append(rate)
            if mode in rep_rates:
                rep_rates[mode].append(rate)
        paired.append(statistics.mean(rep_rates["auto"]) / statistics.mean(rep_rates["plain"]))
        identical &= drafted_ids == reference
    drafting.close()
    session.close()
    med = {mode: statistics.median(values) for mode, values in rates.items()}
    return {
        "case": name, "drafter": spec, "paths": paths, "available": True, "tokens": max_tokens,
        "plain_tok_s": round(med["plain"], 1), "drafted_tok_s": round(med["drafted"], 1),
        "auto_tok_s": round(med["auto"], 1),
        "speedup": round(med["drafted"] / med["plain"], 3), "auto_speedup": round(med["auto"] / med["plain"], 3),
        "auto_speedup_paired": round(statistics.median(paired), 3),
        "auto_rounds": auto_rounds,  # drafting rounds of each auto run: its warm-up, its re-tries
        "identical_output": identical,
        "acceptance": round(stats.accepted / stats.drafted, 3) if stats.drafted else 0.0,
        "rounds": stats.rounds, "drafted": stats.drafted, "accepted": stats.accepted,
        "mean_accepted_len": round(stats.mean_accepted_len, 3), "rollbacks": stats.rollbacks,
        "tree_rounds": stats.tree_rounds, "side_wins": stats.side_wins,
        "auto_off": auto_stats.auto_off, "auto_reason": auto_stats.reason,
        "reps_tok_s": {mode: [round(r, 1) for r in values] for mode, values in rates.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--cases", default="", help="only the cases whose name holds one of these (comma-separated)")
    args = parser.parse_args()
    from engine.models.model_files import resolve_model_ref

    paths = make_models(args.cache, ["hybrid-bench", "hybrid-bench-q8", "hybrid-bench-draft", "eagle3-bench-fitted",
                                     "eagle3-smollm2", "transformer-bench", "eagle3-transformer-bench"])
    smollm2 = resolve_model_ref("default")  # the built-in model as Hearth loads it (its fast-reading copy)
    probe = open_session(str(smollm2), n_ctx=512)
    quote = chat_prompt_tokens(probe.model, [ChatMessage("user", f"Repeat this text exactly:\n\n{DOCUMENT}")])
    probe.close()
    probe = open_session(str(paths["hybrid-bench"]), n_ctx=512)
    story = raw_prompt_tokens(probe.model, "the lighthouse keeper wrote in the log that the storm")
    probe.close()
    hybrid, fitted = paths["hybrid-bench"], f"eagle3:{paths['eagle3-bench-fitted']}"
    draft_model = f"model:{paths['hybrid-bench-draft']}"
    transformer_head = f"eagle3:{paths['eagle3-transformer-bench']}"
    cases = [
        ("smollm2 + prompt lookup (quote a document)", smollm2, quote, "lookup", 1),
        ("hybrid-bench + Q8_0 self-draft", hybrid, story, f"model:{paths['hybrid-bench-q8']}", 1),
        ("hybrid-bench + draft model", hybrid, story, draft_model, 1),
        ("hybrid-bench + MTP head", hybrid, story, "mtp", 1),
        ("hybrid-bench + fitted EAGLE-3 head", hybrid, story, fitted, 1),
        ("smollm2 + prompt lookup, tree", smollm2, quote, "lookup", TREE_PATHS),
        ("hybrid-bench + draft model, tree", hybrid, story, draft_model, TREE_PATHS),
        ("hybrid-bench + MTP head, tree", hybrid, story, "mtp", TREE_PATHS),
        ("hybrid-bench + fitted EAGLE-3 head, tree", hybrid, story, fitted, TREE_PATHS),
        ("smollm2 + random EAGLE-3 head", smollm2, quote, f"eagle3:{paths['eagle3-smollm2']}", 1),
        ("transformer-bench + random EAGLE-3 head", paths["transformer-bench"], story, transformer_head, 1),
        ("transformer-bench + random EAGLE-3 head, tree", paths["transformer-bench"], story, transformer_head,
         TREE_PATHS),
    ]
    costs = {model: pass_times(model, 512, args.reps * 3, threads=2)
             for model in (smollm2, hybrid, paths["transformer-bench"])}
    wanted = [w for w in args.cases.split(",") if w]
    cases = [case for case in cases if not wanted or any(w in case[0] for w in wanted)]
    results = []
    for name, model, tokens, spec, n_paths in cases:
        result = bench_case(name, model, tokens, spec, args.reps, 160, paths=n_paths)
        if result["available"]:
            result.update(ceiling(costs[model], result, n_paths))
        results.append(result)
        print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"bench": "drafting", "reps": args.reps, "results": results}, indent=2))


def ceiling(ms: dict, result: dict, n_paths: int) -> dict:
    """The verify cost of this case's rounds against one token, and the speed-up it allows at the
    measured tokens per round (accepted + the target's own) if drafting itself were free.

    A round's cost is read at its mean draft length (the policy shortens drafts after losses),
    interpolated between the measured depths; a tree case mixes tree rounds (``n_paths`` paths) and
    the chain rounds it falls back to when the drafter has only one guess."""
    if not result["rounds"]:
        return {"verify_cost": 1.0, "ceiling": 1.0, "of_ceiling": round(result["speedup"], 3)}
    mean_draft = result["drafted"] / result["rounds"]

    def cost(width: int) -> float:
        depths = sorted(d for d, w, *rest in ms if w == width and not rest)
        return float(np.interp(mean_draft, depths, [ms[(d, width)] for d in depths])) / ms[(0, 1)]

    tree_share = result["tree_rounds"] / result["rounds"]
    verify = tree_share * cost(n_paths) + (1 - tree_share) * cost(1) if n_paths > 1 else cost(1)
    bound = (result["mean_accepted_len"] + 1) / verify
    return {"mean_draft": round(mean_draft, 2), "verify_cost": round(verify, 2), "ceiling": round(bound, 3),
            "of_ceiling": round(result["speedup"] / bound, 3)}


if __name__ == "__main__":
    main()
