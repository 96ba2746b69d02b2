"""Token sampling on the host, in numpy.

The transforms follow llama.cpp's default chain so settings mean the same thing as in other apps:
the repeat penalty, then top-k on the logits, then top-p on the softmax of the survivors, then min-p
relative to the most likely survivor, then temperature. The result is a :class:`TokenDistribution`: the full
post-transform distribution (sparse: only tokens with non-zero probability), which speculative
verification needs as well as plain sampling. Temperature 0 means greedy: a point mass on the
first argmax, exactly what llama.cpp's greedy sampler picks (after the repeat penalty, as there).

The repeat penalty is llama.cpp's: each distinct token among the *recent* tokens has its logit
divided by the penalty when positive, multiplied when negative (1 = off). Recent means the last
``repeat_last_n`` tokens (default :data:`~engine.protocol.REPEAT_WINDOW`, 64; -1: all of them; 0: no
penalty, as llama.cpp's ``penalty_last_n``) of the answer being written, not of the prompt:
llama.cpp counts the prompt too, which penalises the words of the question an answer should use and
the template's end-of-turn token (answers then run on). Counting only the answer also makes the
penalty independent of what the context held before (a restored snapshot or a fresh read give the
same answer). The caller passes the answer's tokens so far; a speculative verifier passes, for each
drafted position, the answer up to that position (:mod:`engine.speculative.verifier`).

After the repeat penalty comes the sequence penalty (:mod:`engine.decoding.sequence_penalty`, llama.cpp's DRY),
which makes continuing a run the answer already wrote less likely; it looks at the whole answer.

An answer held to a schema or grammar (:mod:`engine.decoding.constraint`) has its disallowed tokens
masked out between the penalties and the transforms (both penalties keep a masked logit masked, so
the order between them does not matter).
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine import protocol as p
from engine.decoding.sequence_penalty import NO_BREAKERS, penalize_sequences


class SamplingError(ValueError):
    """Sampling settings that cannot be used; the message says which and what is allowed."""


_DEFAULT = p.SamplingSpec()  # the defaults are the protocol's (engine.protocol.DEFAULTS)


@dataclass(frozen=True)
class SamplingParams:
    """The sampler's settings (:class:`engine.protocol.SamplingSpec`'s, checked)."""

    temperature: float = _DEFAULT.temperature
    top_k: int = _DEFAULT.top_k
    top_p: float = _DEFAULT.top_p
    min_p: float = _DEFAULT.min_p
    seed: int | None = _DEFAULT.seed
    repeat_penalty: float = _DEFAULT.repeat_penalty
    repeat_last_n: int = _DEFAULT.repeat_last_n  # -1: the whole answer; 0: no penalty
    dry_multiplier: float = _DEFAULT.dry_multiplier  # the sequence penalty; 0: off
    breakers: Container[int] = field(default=NO_BREAKERS, compare=False)  # the model's sequence breakers

    @classmethod
    def from_spec(cls, spec: p.SamplingSpec, breakers: Container[int] = NO_BREAKERS) -> SamplingParams:
        return cls(temperature=spec.temperature, top_k=spec.top_k, top_p=spec.top_p, min_p=spec.min_p, seed=spec.seed,
                   repeat_penalty=spec.repeat_penalty, repeat_last_n=spec.repeat_last_n,
                   dry_multiplier=spec.dry_multiplier, breakers=breakers)

    def validate(self) -> SamplingParams:
        for name in p.SamplingSpec.__struct_fields__:
            if (problem := p.sampling_problem(name, getattr(self, name))) is not None:
                raise SamplingError(problem)
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def repeat_history(self, recent: Sequence[int]) -> list[int]:
        """The tokens of ``recent`` (the answer so far) the repeat penalty looks at: its window."""
        if self.repeat_penalty == 1.0 or self.repeat_last_n == 0:
            return []
        return list(recent if self.repeat_last_n == p.REPEAT_WHOLE_ANSWER else recent[-self.repeat_last_n:])

    def history(self, recent: Sequence[int]) -> list[int]:
        """The tokens of ``recent`` that any of the penalties looks at (the verifiers keep these and add
        each drafted position's tokens): the whole answer with the sequence penalty on, else the
        repeat penalty's window."""
        return list(recent) if self.dry_multiplier > 0 else self.repeat_history(recent)


GREEDY = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                        dry_multiplier=0.0)  # the bare argmax


@dataclass(frozen=True)
class TokenDistribution:
    """Probabilities over the tokens that survived the transforms (all others have probability 0)."""

    ids: np.ndarray  # int64 token ids
    probs: np.ndarray  # float64, sums to 1

    def prob(self, token: int) -> float:
        hits = np.flatnonzero(self.ids == token)
        return float(self.probs[hits[0]]) if hits.size else 0.0

    def dense(self, n_vocab: int) -> np.ndarray:
        out = np.zeros(n_vocab, dtype=np.float64)
        out[self.ids] = self.probs
        return out

    def sample(self, rng: np.random.Generator) -> int:
        if self.ids.size == 1:
            return int(self.ids[0])
        cumulative = np.cumsum(self.probs)
        index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
        return int(self.ids[min(index, self.ids.size - 1)])


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def _top_k(ids: np.ndarray, logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if k <= 0 or k >= ids.size:
        return ids, logits
    keep = np.argpartition(-logits, k - 1)[:k]
    return ids[keep], logits[keep]


def _sort_descending(ids: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-logits, kind="stable")
    return ids[order], logits[order]


def _top_p(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Keep the smallest prefix (by probability) whose mass reaches ``p``; inputs sorted descending."""
    if p >= 1.0:
        return ids, logits
    cumulative = np.cumsum(_softmax(logits))
    n_keep = int(np.searchsorted(cumulative, p, side="left")) + 1
    return ids[:n_keep], logits[:n_keep]


def _min_p(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Keep tokens whose probability is at least ``p`` times the most likely one's."""
    if p <= 0.0:
        return ids, logits
    keep = logits >= logits.max() + np.log(p)
    return ids[keep], logits[keep]


def penalize_repeats(logits: np.ndarray, recent: Sequence[int], params: SamplingParams) -> np.ndarray:
    """``logits`` with llama.cpp's repeat penalty on each distinct token of the last
    ``params.repeat_last_n`` of ``recent`` (a copy; the input is left as it was)."""
    window = params.repeat_history(recent)
    if not window:
        return logits
    penalty = params.repeat_penalty
    ids = np.unique(np.asarray(window, dtype=np.int64))
    out = np.array(logits, dtype=np.float64)
    seen = out[ids]
    out[ids] = np.where(seen > 0, seen / penalty, seen * penalty)
    return out


class Mask(Protocol):
    """What an answer's constraint does to one choice (:class:`engine.decoding.constraint.Constraint`)."""

    @property
    def masking(self) -> bool: ...  # False while the constraint waits (the model still reasons)

    def candidates(self, penalized: np.ndarray, params: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
        """The allowed ids, sorted by value (then id), and their values: every one the transforms could keep."""
        ...

    def waiting(self, penalized: np.ndarray) -> np.ndarray:
        """The row while the constraint waits."""
        ...

    def took(self, token: int) -> None:
        """``token`` was decided (chosen, or a drafted token accepted): advance past it, in order."""
        ...


def distribution(logits: np.ndarray, params: SamplingParams, recent: Sequence[int] = (),
                 constraint: Mask | None = None) -> TokenDistribution:
    """The post-transform distribution for one row of logits (shape ``[n_vocab]``); ``recent``: the
    answer's tokens so far, for the penalties; ``constraint``: the answer's grammar, whose disallowed
    tokens are masked out after the penalties and before the transforms (plain decoding and every
    verifier choose from the same masked distribution)."""
    penalized = penalize(logits, params, recent)
    if constraint is None:
        return transform(penalized, params)
    if not constraint.masking:
        return transform(constraint.waiting(penalized), params)
    return transform_sorted(*constraint.candidates(penalized, params), params)


def penalize(logits: np.ndarray, params: SamplingParams, recent: Sequence[int] = ()) -> np.ndarray:
    """The row after the repeat penalty and the sequence penalty (a copy, or ``logits`` when neither applies)."""
    logits = penalize_repeats(logits, recent, params)
    return penalize_sequences(logits, recent, params.dry_multiplier, params.breakers)


def transform(logits: np.ndarray, params: SamplingParams) -> TokenDistribution:
    """Greedy, or top-k, top-p, min-p and the temperature, over a whole (penalized) row."""
    if params.greedy:
        return TokenDistribution(np.array([int(np.argmax(logits))]), np.array([1.0]))
    values = np.asarray(logits, dtype=np.float64)
    ids, values = _top_k(np.arange(values.size), values, params.top_k)
    ids, values = _sort_descending(ids, values)
    return _finish(ids, values, params)


def transform_sorted(ids: np.ndarray, values: np.ndarray, params: SamplingParams) -> TokenDistribution:
    """:func:`transform` over candidates already sorted by value, descending (ties by id): the
    tokens outside them are masked out."""
    if params.greedy:
        return TokenDistribution(ids[:1].astype(np.int64), np.array([1.0]))
    if params.top_k > 0:
        ids, values = ids[:params.top_k], values[:params.top_k]
    return _finish(ids.astype(np.int64), np.asarray(values, dtype=np.float64), params)


def _finish(ids: np.ndarray, values: np.ndarray, params: SamplingParams) -> TokenDistribution:
    """top-p, min-p and the temperature over candidates sorted descending."""
    ids, values = _top_p(ids, values, params.top_p)
    ids, values = _min_p(ids, values, params.min_p)
    return TokenDistribution(ids, _softmax(values / params.temperature))


def make_rng(seed: int | None) -> np.random.Generator:
    """A generator that is reproducible when ``seed`` is given, fresh entropy otherwise."""
    return np.random.default_rng(seed)
