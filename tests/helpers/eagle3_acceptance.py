"""How often an EAGLE-3 head's greedy guesses are accepted, with the real drafter and verifier.

Every round drafts the full length (``FullChains``: no auto-off, no shortening after a loss), the
drafter chains every guess (``p_min`` 0), and each drafted run is checked against plain decoding of
the same prompt. Used by ``tests/engine/test_eagle3_fitted.py`` and ``tests/bench/bench_eagle3_fitted.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.chat_template import ChatMessage
from engine.templates.prompts import chat_prompt_tokens, raw_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.speculative.eagle3 import Eagle3Drafter
from engine.speculative.policy import DraftPolicy
from engine.speculative.token_sources import SpeculativeSource


class FullChains(DraftPolicy):
    """Every round drafts ``max_draft`` tokens, however many the last one lost."""

    def __init__(self, max_draft: int) -> None:
        super().__init__(max_draft, auto_off=False, start=max_draft)

    def record_round(self, *args) -> None:
        super().record_round(*args)
        self.length = self.max_draft


def prompt_tokens(session, prompt: str, chat: bool) -> list[int]:
    """``prompt`` as the model reads it: a user's message in its chat template, or plain text."""
    if chat:
        return chat_prompt_tokens(session.model, [ChatMessage("user", prompt)])
    return raw_prompt_tokens(session.model, prompt)


def greedy(session, prompt: str, max_tokens: int, proposer: Eagle3Drafter | None = None,
           draft_len: int = 0, chat: bool = False) -> Generation:
    """One greedy run of ``prompt``: plain, or drafting ``draft_len`` tokens a round with ``proposer``."""
    make = None
    if proposer is not None:
        def make(session, sampling, rng):
            proposer.configure(sampling, rng)
            return SpeculativeSource(session, sampling, rng, proposer, FullChains(draft_len))

    tokens = prompt_tokens(session, prompt, chat)
    run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=max_tokens), make_source=make)
    list(run)
    return run


def acceptance(target: Path, head: Path, prompts: list[str], max_tokens: int,
               lengths: tuple[int, ...] = (1, 2, 3, 4), chat: bool = False) -> dict[int, dict]:
    """Per draft length: rounds, drafted, accepted, acceptance (accepted / drafted), mean accepted
    length per round and whether every drafted run equals plain decoding token for token. ``chat``:
    each prompt is a user's message in the model's chat template."""
    session = open_session(str(target), n_ctx=1024, draft_max=max(lengths))
    proposer = Eagle3Drafter(head, session, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)
    try:
        plain = [greedy(session, p, max_tokens, chat=chat).token_ids for p in prompts]
        out = {}
        for k in lengths:
            totals = {"rounds": 0, "drafted": 0, "accepted": 0}
            identical = True
            for prompt, reference in zip(prompts, plain):
                run = greedy(session, prompt, max_tokens, proposer, k, chat=chat)
                identical &= run.token_ids == reference
                for key in totals:
                    totals[key] += getattr(run.source.stats, key)
            out[k] = {**totals, "acceptance": round(totals["accepted"] / max(1, totals["drafted"]), 3),
                      "mean_accepted_len": round(totals["accepted"] / max(1, totals["rounds"]), 3),
                      "identical_output": identical}
    finally:
        proposer.close()
        session.close()
    return out
