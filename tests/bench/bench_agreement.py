"""Speed against acceptance: what drafting gains on a real-shape model when the drafter agrees with it
on a chosen share of tokens.

No drafter with real weights exists for the catalogue's shapes here (their fixtures have random
weights), so this makes one from the target: :class:`AgreeingDrafter` knows the target's greedy
answer (a plain run first) and proposes its next token with probability ``agreement``, else a token
the target does not write, and so are the chain's guesses after it (a verify batch holds them all, as
a head's chain). So the acceptance is set, the drafting itself costs
nothing (as prompt lookup), and what is measured is the rest: the verify batches of the real model
with their rollbacks, chains of ``--draft-max`` and trees of ``--paths`` (a tree's first guesses
have the right one at rank r with probability ``agreement * (1 - agreement)^r``, the paths after
it agree like a chain). Each cell is the median decode rate (first token excluded) over ``--reps``
alternating runs, against plain decoding; its ceiling is ``(accepted per round + 1) / verify cost``
with the verify cost measured in the same run (a round's time over a plain step's), and every drafted
answer must equal plain decoding's.

Prints one JSON object. Usage: ``python tests/bench/bench_agreement.py [--models qwen35-0.8b-shape,
llama-3.2-1b-shape] [--agreements 0.5,0.7,0.9] [--tokens 64] [--reps 3] [--draft-max 4] [--paths 3]``.
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

from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.decoding.sampling import GREEDY  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from engine.speculative.drafting import Drafting  # noqa: E402
from engine.speculative.policy import DraftPolicy  # noqa: E402
from engine.speculative.proposer import Draft, Proposer  # noqa: E402
from engine.speculative.token_sources import SpeculativeSource  # noqa: E402
from engine.speculative.tree_source import TreeSource  # noqa: E402
from tests.helpers.real_models import real_model  # noqa: E402

PROMPT = "The lighthouse keeper opened her log and wrote that the storm"


class AgreeingDrafter(Proposer):
    """Guesses the target's greedy answer right with probability ``agreement`` per token."""

    kind = "agreeing"

    def __init__(self, n_prompt: int, answer: list[int], agreement: float, n_vocab: int, seed: int) -> None:
        self.n_prompt, self.answer, self.agreement, self.n_vocab = n_prompt, answer, agreement, n_vocab
        self.rng = np.random.default_rng(seed)

    def _wrong(self, right: int) -> int:
        return (right + 1 + int(self.rng.integers(0, self.n_vocab - 1))) % self.n_vocab

    def _chain(self, start: int, k: int, first_right: bool | None = None) -> list[int]:
        """k guesses, as a head chains them: after a wrong one the rest are wrong too (the verify
        batch still holds them all)."""
        tokens, right = [], True
        for i in range(min(k, len(self.answer) - start)):
            right = right and (first_right if i == 0 and first_right is not None else self.rng.random() < self.agreement)
            right_token = self.answer[start + i]
            tokens.append(right_token if right else self._wrong(right_token))
        return tokens

    def propose(self, history: list[int], k: int) -> Draft:
        tokens = self._chain(len(history) - self.n_prompt, k)
        return Draft(tokens, [None] * len(tokens))

    def propose_paths(self, history: list[int], k: int, width: int) -> list[Draft]:
        start = len(history) - self.n_prompt
        if start >= len(self.answer):
            return [Draft()]
        rank = int(self.rng.geometric(self.agreement)) - 1  # where the right first token is among the guesses
        paths, seen = [], set()
        for p in range(width):
            tokens = self._chain(start, k, first_right=(p == rank))
            if tokens and tokens[0] not in seen:
                seen.add(tokens[0])
                paths.append(Draft(tokens, [None] * len(tokens)))
        return paths or [Draft()]


def run(session, prompt: list[int], tokens: int, make=None) -> tuple[float, Generation]:
    generation = Generation(session, prompt, GenerationSettings(GREEDY, max_tokens=tokens), make_source=make)
    list(generation)
    t = generation.timings
    return (t.gen_n - 1) / ((t.gen_ms - (t.ttft_ms - t.prompt_ms)) / 1000), generation


def cells(name: str, agreements: list[float], tokens: int, reps: int, draft_max: int, paths: int) -> list[dict]:
    out = []
    for width in (1, paths):
        session = open_session(str(real_model(name)), n_ctx=1024, draft_max=draft_max,
                               draft_width=width)
        try:
            prompt = raw_prompt_tokens(session.model, PROMPT)
            run(session, prompt, 8)  # warm-up
            _, reference = run(session, prompt, tokens)
            answer = reference.token_ids
            for agreement in agreements:
                def make(s, sampling, rng, seed=[0]):
                    seed[0] += 1
                    drafter = AgreeingDrafter(len(prompt), answer, agreement, s.model.n_vocab, seed[0])
                    policy = DraftPolicy(draft_max, auto_off=False, start=draft_max)
                    if width > 1:
                        return TreeSource(s, sampling, rng, drafter, policy, width=width, max_rows=Drafting.tree_rows())
                    return SpeculativeSource(s, sampling, rng, drafter, policy)

                rates = {"plain": [], "drafted": []}
                identical, stats = True, []
                for rep in range(reps):
                    for mode in ("plain", "drafted") if rep % 2 == 0 else ("drafted", "plain"):
                        rate, generation = run(session, prompt, tokens, make if mode == "drafted" else None)
                        rates[mode].append(rate)
                        if mode == "drafted":
                            identical &= generation.token_ids == answer
                            stats.append(generation.source.stats)
                plain, drafted = statistics.median(rates["plain"]), statistics.median(rates["drafted"])
                rounds = sum(s.rounds for s in stats)
                accepted_per_round = sum(s.accepted for s in stats) / max(1, rounds)
                speedup = drafted / plain
                verify_cost = (accepted_per_round + 1) / speedup  # a round's time in plain steps
                out.append({"model": name, "agreement": agreement, "paths": width,
                            "acceptance": round(sum(s.accepted for s in stats) / max(1, sum(s.drafted for s in stats)), 3),
                            "accepted_per_round": round(accepted_per_round, 3), "plain_tok_s": round(plain, 2),
                            "speedup": round(speedup, 3), "round_cost_in_plain_steps": round(verify_cost, 3),
                            "identical_output": identical})
                print(json.dumps(out[-1]), file=sys.stderr, flush=True)
        finally:
            session.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="qwen35-0.8b-shape,llama-3.2-1b-shape")
    parser.add_argument("--agreements", default="0.5,0.7,0.9")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--draft-max", type=int, default=4)
    parser.add_argument("--paths", type=int, default=3)
    args = parser.parse_args()
    agreements = [float(a) for a in args.agreements.split(",")]
    results = []
    for name in args.models.split(","):
        results += cells(name, agreements, args.tokens, args.reps, args.draft_max, args.paths)
    print(json.dumps({"bench": "agreement", "tokens": args.tokens, "reps": args.reps, "draft_max": args.draft_max,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
