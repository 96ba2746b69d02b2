"""Checking a tree of drafts against the target, so that a tree changes no token either.

A tree is given as paths of equal depth from the pending token; path 0 is the drafter's first
choice and paths that share a prefix share those nodes. Every candidate is a deterministic guess
(a point mass), so the rule of :mod:`engine.speculative.verifier` extends to several candidates at
one node by trying them in turn (SpecInfer's multi-candidate rejection with point masses):

- greedy: the node's accepted child is the candidate equal to the target's argmax, if any;
- sampling: candidate c is accepted with probability p(c); if it is rejected, p becomes
  normalize(p without c) and the next candidate is tried with that; if all are rejected the token
  is sampled from what remains. The token that comes out has exactly the distribution p.

The walk follows the accepted child down the paths that carry it, and ends with the target's own
token at the first node where no candidate is accepted, or a bonus token after a whole path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.decoding.sampling import Mask, SamplingParams, TokenDistribution, distribution
from engine.speculative.verifier import decide

RowLogits = Callable[[int, int], np.ndarray]  # (path, depth) -> the target's logits after path[:depth]


@dataclass(frozen=True)
class TreeVerdict:
    tokens: list[int]  # accepted draft tokens, then one token from the target
    n_accepted: int
    path: int  # the lowest-numbered path that holds every accepted token


def verify_tree(paths: Sequence[Sequence[int]], rows: RowLogits, params: SamplingParams,
                rng: np.random.Generator, recent: Sequence[int] = (), constraint: Mask | None = None) -> TreeVerdict:
    """``paths`` all have the same depth; ``recent`` is the answer up to the pending token;
    ``constraint`` the answer's grammar, standing after it (each token decided here advances it)."""
    history = params.history(recent)  # what the penalties see before the draft; each position adds its own
    alive = list(range(len(paths)))
    out: list[int] = []
    for depth in range(len(paths[0])):
        p = distribution(rows(alive[0], depth), params, history + out, constraint)
        candidates = list(dict.fromkeys(paths[i][depth] for i in alive))
        token, accepted = _node(p, candidates, params, rng)
        out.append(decide(token, constraint))
        if not accepted:
            return TreeVerdict(out, depth, alive[0])
        alive = [i for i in alive if paths[i][depth] == token]
    bonus = distribution(rows(alive[0], len(paths[0])), params, history + out, constraint).sample(rng)
    return TreeVerdict(out + [decide(bonus, constraint)], len(out), alive[0])


def _node(p: TokenDistribution, candidates: list[int], params: SamplingParams,
          rng: np.random.Generator) -> tuple[int, bool]:
    """The token at one node and whether it is one of the candidates."""
    if params.greedy:
        top = int(p.ids[0])
        return top, top in candidates
    for candidate in candidates:
        if rng.random() < p.prob(candidate):
            return candidate, True
        p = without(p, candidate)
    return p.sample(rng), False


def without(p: TokenDistribution, token: int) -> TokenDistribution:
    """normalize(p without ``token``): the residual of a rejected point-mass candidate."""
    keep = p.ids != token
    total = p.probs[keep].sum()
    if total <= 0.0:  # p was a point mass on the token, so its rejection had probability 0
        return p
    return TokenDistribution(p.ids[keep], p.probs[keep] / total)
