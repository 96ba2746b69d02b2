"""The one interface every drafter implements: propose up to k tokens that may follow the history.

A proposal carries, for each drafted token, the drafter's distribution ``q`` when it sampled from
one (a draft model at temperature > 0) or ``None`` when the token is a deterministic guess (prompt
lookup, greedy drafting): the verifier treats ``None`` as a point mass. Because the verifier only
sees token ids and these distributions, an EAGLE-3 head or a tree drafter can be added as another
proposer without touching it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from engine.decoding.sampling import SamplingParams, TokenDistribution, distribution


@dataclass
class Draft:
    tokens: list[int] = field(default_factory=list)
    q: list[TokenDistribution | None] = field(default_factory=list)  # one per token


class Proposer(ABC):
    kind: str = "none"
    free: bool = False  # proposing costs nothing worth counting (no model runs): auto-off may watch its guesses

    @abstractmethod
    def propose(self, history: list[int], k: int) -> Draft:
        """Up to ``k`` tokens that may follow ``history`` (the target's tokens so far, the last one
        sampled but not yet decoded)."""

    def propose_paths(self, history: list[int], k: int, width: int) -> list[Draft]:
        """Up to ``width`` different drafts of up to ``k`` tokens, the first choice first: the paths
        of a tree (drafts that share a prefix share those nodes). A drafter with one guess gives one."""
        return [self.propose(history, k)]

    def follow_path(self, tokens: list[int], start: int, first_row: int) -> None:
        """A tree round's winning path decoded ``tokens`` from ``start`` on, as rows ``first_row..``
        of the batch (a drafter that follows the target's decodes reads them here)."""

    def prepare(self, history: list[int]) -> None:
        """The prompt has been read; ``history`` is what the target holds (catch up here, untimed)."""

    def settle(self, history: list[int]) -> None:
        """The target accepted some of the draft; ``history`` is now its exact token list."""

    def reset(self) -> None:
        """A new request starts (before its prompt is read); forget any per-sequence state."""

    def finish(self) -> None:
        """The request is over."""

    def set_active(self, active: bool) -> None:
        """Whether this round drafts; the auto-off policy has it idle while drafting loses."""

    def close(self) -> None:
        pass


def pick_draft_token(logits: np.ndarray, sampling: SamplingParams, rng: np.random.Generator,
                     p_min: float) -> tuple[int, TokenDistribution | None, bool]:
    """A model drafter's next guess: (token, its q or None for greedy, confident enough to go on).

    Greedy drafting takes the argmax and is confident while its probability is at least ``p_min``;
    sampled drafting draws from the same transformed distribution the verifier will use as q.
    """
    if sampling.greedy:
        top = int(np.argmax(logits))
        shifted = np.exp(logits - logits[top])
        return top, None, 1.0 / shifted.sum() >= p_min
    q = distribution(logits, sampling)
    return q.sample(rng), q, True


def top_tokens(logits: np.ndarray, n: int) -> list[int]:
    """The ``n`` likeliest token ids, likeliest first (ties by id)."""
    n = min(n, logits.size)
    best = np.argpartition(-logits, n - 1)[:n]
    return [int(t) for t in best[np.lexsort((best, -logits[best]))]]
