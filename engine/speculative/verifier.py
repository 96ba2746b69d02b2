"""Checking a draft against the target's own distributions, so drafting changes no token.

Greedy (temperature 0): accept the longest prefix of the draft that equals the target's argmax at
each position, then take the target's own next token. Sampling: the rule of Leviathan et al. and
Chen et al. — accept draft token d with probability min(1, p(d)/q(d)); at the first rejection,
sample from normalize(max(0, p − q)) and stop; if every token is accepted, sample a bonus token
from p. A deterministic draft (q = None) is a point mass, so acceptance is p(d) and the residual is
p without d. Either way the output has exactly the target's distribution.

With a repeat penalty, each position's p is the target's distribution after the answer so far plus
the draft tokens before it, exactly what plain decoding would have sampled from there. Under an
answer's constraint (:mod:`engine.decoding.constraint`) each p is masked by the grammar standing after
those same tokens: every decided token advances it before the next position is judged, so a drafted
token the grammar rejects has p = 0 and is never accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.decoding.sampling import Mask, SamplingParams, TokenDistribution, distribution


@dataclass(frozen=True)
class Verdict:
    tokens: list[int]  # accepted draft tokens, then one token from the target
    n_accepted: int


def verify(
    draft_tokens: list[int],
    draft_q: list[TokenDistribution | None],
    target_rows: list[np.ndarray],
    params: SamplingParams,
    rng: np.random.Generator,
    recent: Sequence[int] = (),
    constraint: Mask | None = None,
) -> Verdict:
    """``target_rows[i]`` are the target's logits after the history plus ``draft_tokens[:i]``;
    ``recent`` the answer's tokens up to the draft (for the repeat penalty); ``constraint`` the
    answer's grammar, standing after ``recent`` (each token decided here advances it)."""
    history = params.history(recent)  # what the penalties see before the draft; each position adds its own
    out: list[int] = []
    for i, token in enumerate(draft_tokens):
        p = distribution(target_rows[i], params, history + list(draft_tokens[:i]), constraint)
        if params.greedy:
            accepted = token == int(p.ids[0])
        else:
            accepted = accept_draft_token(token, p, draft_q[i], rng)
        if not accepted:
            chosen = int(p.ids[0]) if params.greedy else sample_residual(p, draft_q[i], token, rng)
            return Verdict(out + [decide(chosen, constraint)], i)
        out.append(decide(token, constraint))
    bonus = distribution(target_rows[len(draft_tokens)], params, history + list(draft_tokens), constraint).sample(rng)
    return Verdict(out + [decide(bonus, constraint)], len(draft_tokens))


def decide(token: int, constraint: Mask | None) -> int:
    """``token``, decided: the constraint (if any) advanced past it."""
    if constraint is not None:
        constraint.took(token)
    return token


def accept_draft_token(token: int, p: TokenDistribution, q: TokenDistribution | None,
                       rng: np.random.Generator) -> bool:
    p_d = p.prob(token)
    q_d = 1.0 if q is None else q.prob(token)
    if q_d <= 0.0:
        return False  # the drafter cannot have proposed it; never accept what q says is impossible
    return rng.random() < min(1.0, p_d / q_d)


def sample_residual(p: TokenDistribution, q: TokenDistribution | None, token: int,
                    rng: np.random.Generator) -> int:
    """A sample from normalize(max(0, p − q)) over p's support (the only tokens it can give)."""
    q_on_p = np.zeros_like(p.probs)
    if q is None:
        q_on_p[p.ids == token] = 1.0
    else:
        order = np.argsort(q.ids)
        q_ids, q_probs = q.ids[order], q.probs[order]
        at = np.minimum(np.searchsorted(q_ids, p.ids), len(q_ids) - 1)
        q_on_p = np.where(q_ids[at] == p.ids, q_probs[at], 0.0)
    residual = np.maximum(p.probs - q_on_p, 0.0)
    total = residual.sum()
    if total <= 0.0:  # p == q on p's support: any rejection is impossible in exact arithmetic
        return TokenDistribution(p.ids, p.probs).sample(rng)
    return TokenDistribution(p.ids, residual / total).sample(rng)
