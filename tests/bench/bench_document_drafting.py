"""Drafting on questions about a loaded document: acceptance and speed, kept on and under ``auto``.

A document's questions are where answers repeat their source (a quote, a list of what it names, a
summary in its words), so prompt lookup, which drafts from n-grams of everything the model holds,
should pay there if anywhere. Each case puts :data:`DOCUMENT` and one of :data:`QUESTIONS` in a chat
turn and writes the answer greedily: plain, with the drafter kept on, and under the ``auto`` policy
(what a user gets), plain and auto twice a rep, mirrored around the kept run (``PAIRED_ORDER`` of
``bench_drafting.py``); the speed is the decode rate (first token excluded), the median over ``--reps``,
and ``auto_speedup_paired`` the median over reps of each rep's auto over plain. Every drafted answer is checked against plain decoding's.

Models: the built-in model as Hearth loads it (real weights: its answers quote), and the Qwen3.5-0.8B
shape (random weights: its answers do not, so it shows what drafting costs where it cannot win; its
``auto`` is the model's own MTP head). Drafters: ``auto`` and ``lookup``.

Prints one JSON object. Usage: ``python tests/bench/bench_document_drafting.py [--reps 5]
[--models default,qwen35-0.8b-shape] [--max-tokens 160]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.templates.chat_template import ChatMessage  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from engine.templates.prompts import chat_prompt_tokens  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.protocol.draft_choice import parse_draft_spec  # noqa: E402
from engine.speculative.drafting import Drafting  # noqa: E402
from tests.bench.bench_drafting import PAIRED_ORDER, decode_rate  # noqa: E402
from tests.helpers.real_models import real_model  # noqa: E402

DOCUMENT = """Port Ellen Lighthouse: a short history

The lighthouse at Port Ellen was built in 1832 to guide ships through the narrow channel between the island and the mainland. The tower is 21 metres tall and was built from local grey stone by the mason Duncan MacArthur and a crew of eleven men. Its first lamp burned whale oil and could be seen from 14 miles away on a clear night.

Its keeper, Margaret Hale, kept a daily log of the weather, the ships that passed and the state of the lamp. She took the post in 1839 after the death of her husband, Thomas Hale, who had been the first keeper. In the winter of 1847 a storm destroyed the jetty and cut the island off for eleven days; the log records that the lamp was never allowed to go dark. Margaret Hale kept the light until 1871, when her son William took over.

In 1902 the whale-oil lamp was replaced by a paraffin burner, and in 1934 the lighthouse was connected to the island's new electricity supply. The tower was automated in 1961 and the last keeper, Robert Innes, left in the spring of that year. In 1988 the Port Ellen Heritage Trust bought the keeper's cottage and opened it as a small museum.

The museum is open from April to October, every day except Monday, from ten in the morning until five in the afternoon. Visitors can climb the 112 steps to the lamp room, see the brass clockwork that once turned the lens, and read pages of Margaret Hale's log in a glass case. Tickets cost 6 pounds for adults and 3 pounds for children; members of the Trust go free. A small shop sells postcards, maps of the coast and a book about the storms of the nineteenth century.
"""

QUESTIONS = {
    "quote": "Quote the paragraph about Margaret Hale exactly as it is written.",
    "list": "List every year mentioned in the document, each with what happened in it.",
    "summary": "Summarize the document in five sentences.",
    "answer": "When is the museum open, and how much do tickets cost?",
}


def case(model: str, path: Path, question: str, spec: str, reps: int, max_tokens: int) -> dict:
    session = open_session(str(path), n_ctx=4096, draft_max=4)
    drafting = Drafting(session)
    try:
        tokens = chat_prompt_tokens(session.model, [ChatMessage("user", f"{DOCUMENT}\n{QUESTIONS[question]}")])
        kept, kept_stats = drafting.plan(parse_draft_spec(spec), 4, auto_off=False)
        auto, _ = drafting.plan(parse_draft_spec(spec), 4, auto_off=True)
        rates: dict[str, list[float]] = {"plain": [], "kept": [], "auto": []}
        identical, stats, paired = True, {}, []
        decode_rate(session, tokens, 8)  # warm-up
        for rep in range(reps):
            start = {mode: len(values) for mode, values in rates.items()}
            for mode in PAIRED_ORDER[rep % 2]:
                mode = "kept" if mode == "drafted" else mode
                rate, run = decode_rate(session, tokens, max_tokens, {"plain": None, "kept": kept, "auto": auto}[mode])
                rates[mode].append(rate)
                if mode == "plain":
                    reference = run.token_ids
                else:
                    stats[mode], ids = run.source.stats, run.token_ids
                    identical &= ids == reference or not reference
            paired.append(statistics.mean(rates["auto"][start["auto"]:]) / statistics.mean(rates["plain"][start["plain"]:]))
        med = {mode: statistics.median(values) for mode, values in rates.items()}
        kept_s, auto_s = stats["kept"], stats["auto"]
        return {
            "model": model, "question": question, "drafter": spec, "kind": kept_s.kind, "tokens": len(reference),
            "plain_tok_s": round(med["plain"], 1), "kept_speedup": round(med["kept"] / med["plain"], 3),
            "auto_speedup": round(med["auto"] / med["plain"], 3), "identical_output": identical,
            "auto_speedup_paired": round(statistics.median(paired), 3),
            "kept_acceptance": round(kept_s.accepted / kept_s.drafted, 3) if kept_s.drafted else 0.0,
            "kept_accepted_per_round": round(kept_s.mean_accepted_len, 2),
            "auto_drafted": auto_s.drafted, "auto_accepted": auto_s.accepted, "auto_reason": auto_s.reason,
        }
    finally:
        drafting.close()
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--models", default="default,qwen35-0.8b-shape")
    parser.add_argument("--questions", default=",".join(QUESTIONS))
    parser.add_argument("--drafters", default="auto,lookup")
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()
    results = []
    for model in args.models.split(","):
        path = resolve_model_ref("default") if model == "default" else real_model(model)
        for question in args.questions.split(","):
            for spec in args.drafters.split(","):
                results.append(case(model, path, question, spec, args.reps, args.max_tokens))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"bench": "document_drafting", "reps": args.reps, "max_tokens": args.max_tokens,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
