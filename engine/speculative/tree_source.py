"""Tree drafting as a token source: several draft paths verified in one batch, one state per path.

A drafter that can give several guesses (:meth:`Proposer.propose_paths`) proposes up to ``width``
paths; they are cut to one depth (llama.cpp batches sequences of equal length together, and a
path's rollback needs its whole path in one batch), decoded at once by :class:`TreeState`, and
checked by :func:`verify_tree`. The path that holds the accepted tokens becomes the trunk. A
proposal of one path is verified as a chain, exactly as :class:`SpeculativeSource` does.
"""

from __future__ import annotations

import time

import numpy as np

from engine.decoding.sampling import SamplingParams
from engine.models.session import ModelSession
from engine.speculative.policy import DraftPolicy
from engine.speculative.proposer import Draft, Proposer
from engine.speculative.token_sources import Round, SpeculativeSource
from engine.speculative.tree_state import TreeState
from engine.speculative.tree_verifier import verify_tree


class TreeSource(SpeculativeSource):
    def __init__(self, session: ModelSession, sampling: SamplingParams, rng: np.random.Generator,
                 proposer: Proposer, policy: DraftPolicy, width: int, max_rows: int) -> None:
        super().__init__(session, sampling, rng, proposer, policy)
        self.tree = TreeState(session.context, session.facts.has_recurrent_state)
        self.width = min(width, self.tree.width)
        self.max_rows = max_rows  # rows one verify batch may hold and stay batch-exact

    def _propose(self, pending: int, k: int) -> list[Draft]:
        paths = [d for d in self.proposer.propose_paths(self.session.tokens + [pending], k, self.width) if d.tokens]
        if len(paths) < 2:
            return paths
        depth = min(k, *(len(d.tokens) for d in paths))
        n_paths = min(len(paths), self.max_rows // (depth + 1))
        if self._free_cells() < n_paths * (depth + 1):
            self.tree.compact()
        if n_paths < 2 or self._free_cells() < n_paths * (depth + 1):
            return paths[:1]
        return [Draft(d.tokens[:depth], d.q[:depth]) for d in paths[:n_paths]]

    def _free_cells(self) -> int:
        return self.session.n_ctx - self.session.n_past - self.tree.parked - 2

    def _verify(self, pending: int, drafts: list[Draft], k: int, started: float) -> list[int]:
        if len(drafts) == 1:
            return super()._verify(pending, drafts, k, started)
        paths = [d.tokens for d in drafts]
        depth, start, context = len(paths[0]), self.session.n_past, self.session.context
        self.tree.decode(pending, paths, start)
        verdict = verify_tree(paths, lambda path, d: context.logits(self.tree.row(path, d, depth)), self.sampling,
                              self.rng, recent=self.answer, constraint=self.constraint)
        self.session.tokens.extend([pending, *paths[verdict.path]])
        self.proposer.follow_path([pending, *paths[verdict.path]], start, self.tree.row(verdict.path, 0, depth))
        self._round = Round(start, depth, len(self.answer), verdict.path, len(paths))
        self.answer.extend(verdict.tokens)
        self.from_draft = [True] * verdict.n_accepted + [False]
        self._count(depth, verdict.n_accepted, time.perf_counter() - started)
        self.stats.tree_rounds += 1
        self.stats.side_wins += verdict.path != 0
        return verdict.tokens

    def _trim(self, round_: Round, keep: int, n_used: int) -> None:
        if round_.n_paths == 1:
            super()._trim(round_, keep, n_used)
            return
        self.tree.settle(round_.path, round_.n_paths, round_.start, round_.n_draft, keep)
        del self.session.tokens[keep:]
        self.stats.rollbacks += n_used < round_.n_draft

    def finish(self) -> None:
        self.tree.compact()
        super().finish()
