"""Where generated tokens come from: one plain decode step, or a speculative round.

Both are *token sources* for :class:`engine.decoding.generation.Generation`. Between steps the session
holds the history and one *pending* token (sampled, not yet decoded). ``step(pending)`` decodes it
(with a draft, in one batch with logits at every row), and returns the tokens that follow it:
accepted draft tokens, then one token the target sampled itself. The caller consumes them in order
and may stop early (end of text, a stop string, the token limit); ``settle(n_used)`` then trims the
state to the pending token plus the ``n_used`` tokens it kept, with one ``llama_memory_seq_rm``:
the KV is truncated and, for hybrid models, the recurrent state rolls back through its snapshot
planes (``n_rs_seq``), so the state is exactly what plain decoding would have built.

A source keeps the answer's tokens so far (``answer``): the repeat penalty looks at them
(:mod:`engine.decoding.sampling`). The verifier applies it at each drafted position with the answer up to
that position, so drafting stays exact with the penalty on. Drafters propose without it (they do
not know the answer); a drafted token the penalty makes unlikely is simply rejected more often.
An answer's constraint (``constraint``, :mod:`engine.decoding.constraint`) is the same: plain decoding
and the verifiers mask each choice by it and advance it with each token decided; drafters propose
without it, and a drafted token it rejects is never accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.protocol.reports import DraftStats
from engine.decoding.constraint import Constraint
from engine.decoding.sampling import SamplingParams, distribution
from engine.models.session import ModelSession
from engine.speculative.policy import DraftPolicy
from engine.speculative.proposer import Draft, Proposer
from engine.speculative.verifier import verify


@dataclass(frozen=True)
class Round:
    """A verified round: where its pending token went, how many tokens it drafted on its chosen
    path, how long the answer was before it, and (for a tree) which path won of how many."""

    start: int
    n_draft: int
    answered: int
    path: int = 0
    n_paths: int = 1


class PlainSource:
    """One token per step: decode the pending token, sample the next."""

    def __init__(self, session: ModelSession, sampling: SamplingParams, rng: np.random.Generator) -> None:
        self.session, self.sampling, self.rng = session, sampling, rng
        self.from_draft: list[bool] = [False]
        self.stats: DraftStats | None = None  # plain decoding drafts nothing
        self.answer: list[int] = []  # the tokens written so far, the last one pending
        self.constraint: Constraint | None = None  # the answer's grammar (Generation sets it), standing after answer

    def first(self) -> int:
        return self._sample()

    def _sample(self) -> int:
        token = distribution(self.session.last_logits(), self.sampling, self.answer, self.constraint).sample(self.rng)
        if self.constraint is not None:
            self.constraint.took(token)
        self.answer.append(token)
        return token

    def step(self, pending: int) -> list[int]:
        self.session.feed([pending])
        return [self._sample()]

    def settle(self, n_used: int) -> None:
        pass

    def finish(self) -> None:
        """The request is over (finished, stopped or failed)."""


class SpeculativeSource(PlainSource):
    def __init__(self, session: ModelSession, sampling: SamplingParams, rng: np.random.Generator,
                 proposer: Proposer, policy: DraftPolicy) -> None:
        super().__init__(session, sampling, rng)
        self.proposer, self.policy = proposer, policy
        self.stats = DraftStats(kind=proposer.kind)
        self._round: Round | None = None  # the round whose tokens are being used
        self.batches: list[int] = []  # how many tokens each decode left in the state (for replay checks)
        self._guess: tuple[list[int], int] | None = None  # an unverified guess while off, and where it starts in the answer
        proposer.reset()

    def _room(self) -> int:
        return self.session.n_ctx - self.session.n_past - 2

    def step(self, pending: int) -> list[int]:
        k = min(self.policy.draft_length(), self._room())
        self.proposer.set_active(k > 0)
        if k > 0:
            # A one-off catch-up, not the cost of a round; after the first token is out, which
            # never waits for a draft model to read the prompt.
            self.proposer.prepare(self.session.tokens)
        started = time.perf_counter()
        drafts = self._propose(pending, k) if k > 0 else []
        if not drafts or not drafts[0].tokens:
            if k == 0 and self.proposer.free and self.policy.off and self._guess is None:
                self._guess = (self.proposer.propose(self.session.tokens + [pending], self.policy.max_draft).tokens,
                               len(self.answer))
            tokens = super().step(pending)
            self.batches.append(1)
            self.from_draft = [False]
            self.policy.record_plain(time.perf_counter() - started)
            self._score_guess()
            self.stats.auto_off, self.stats.reason = self.policy.ever_off, self.policy.reason
            return tokens
        return self._verify(pending, drafts, k, started)

    def _score_guess(self) -> None:
        """Once the answer shows how many tokens of the unverified guess were right, tell the policy."""
        if self._guess is None:
            return
        guess, start = self._guess
        written = self.answer[start:start + len(guess)]
        right = next((i for i, (a, b) in enumerate(zip(guess, written)) if a != b), len(written))
        if right < len(written) or len(written) == len(guess):
            self._guess = None
            if guess:
                self.policy.record_guess(right)

    def _propose(self, pending: int, k: int) -> list[Draft]:
        """The drafter's proposal: one chain (a tree source asks for several paths)."""
        return [self.proposer.propose(self.session.tokens + [pending], k)]

    def _verify(self, pending: int, drafts: list[Draft], k: int, started: float) -> list[int]:
        """Verify one chain of drafts in one batch; the target's tokens that follow ``pending``."""
        draft = drafts[0]
        drafted = draft.tokens[:k]
        start = self.session.n_past
        self.session.context.decode([pending, *drafted], start, all_logits=True)
        self.session.tokens.extend([pending, *drafted])
        rows = [self.session.context.logits(i) for i in range(len(drafted) + 1)]
        verdict = verify(drafted, draft.q[: len(drafted)], rows, self.sampling, self.rng, recent=self.answer,
                         constraint=self.constraint)
        self._round = Round(start, len(drafted), len(self.answer))
        self.answer.extend(verdict.tokens)
        self.from_draft = [True] * verdict.n_accepted + [False]
        self._count(len(drafted), verdict.n_accepted, time.perf_counter() - started)
        return verdict.tokens

    def _count(self, n_draft: int, n_accepted: int, seconds: float) -> None:
        s = self.stats
        s.rounds, s.drafted, s.accepted = s.rounds + 1, s.drafted + n_draft, s.accepted + n_accepted
        s.mean_accepted_len = s.accepted / s.rounds
        self.policy.record_round(n_draft, n_accepted, n_accepted + 1, seconds)
        s.auto_off, s.reason = self.policy.ever_off, self.policy.reason

    def settle(self, n_used: int) -> None:
        if self._round is None:
            return
        round_, self._round = self._round, None
        keep = round_.start + 1 + n_used
        self.batches.append(1 + n_used)
        del self.answer[round_.answered + n_used + 1:]  # the verdict's tokens past the next pending one
        self._trim(round_, keep, n_used)
        self.proposer.settle(self.session.tokens)

    def _trim(self, round_: Round, keep: int, n_used: int) -> None:
        """Drop the draft rows past ``keep`` (KV truncated, recurrent state rolled back)."""
        if n_used < round_.n_draft:
            if not self.session.context.seq_rm(0, keep, -1):
                raise RuntimeError("llama.cpp refused to roll back the rejected draft tokens")
            del self.session.tokens[keep:]
            self.stats.rollbacks += 1

    def finish(self) -> None:
        self.proposer.finish()
