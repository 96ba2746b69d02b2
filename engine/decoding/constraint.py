"""An answer held to a grammar: which tokens each choice may take, decided exactly and cheaply.

**The mask.** :meth:`Constraint.candidates` gives :func:`engine.decoding.sampling.distribution` the
allowed tokens of a penalized row, sorted by value (ties by id, as ``argmax`` breaks them), and their
values; the sampler's transforms then run over them alone. Asking the grammar about the whole
vocabulary costs milliseconds (llama.cpp decodes every token's text and walks its stacks), so the row
is asked in growing blocks of its best values: the best, then the best 64, the best 1024, then all.
A block is every id whose value is at least some bound, ties included, so the ids not yet asked all
have smaller values. The asking stops as soon as those ids cannot change the result
(:func:`settled`): greedy, once one token is allowed; top-k, once k are; min-p, once the rest fall
below its cut; top-p, once the rest's largest possible mass cannot move its cut. The result is the
transforms of the fully masked row, computed from a few tokens in the common case (greedy, and most
sampled choices inside a string). It is a deterministic function of (row, answer so far, grammar
state), so plain decoding and both verifiers, which read bit-identical rows, choose alike: greedy
drafting stays identical, and sampled drafting keeps the distribution (a drafted token the grammar
rejects has p = 0, and the residuals draw from p's support).

**The state.** One grammar state per answer, advanced by :meth:`Constraint.took` with every token
decided, in order: the verifiers decide drafted positions strictly in order and stop at the first
rejection, so the state always stands after the answer's tokens so far; nothing is ever cloned or
rolled back. Tokens a round decided past where the answer ends are dropped with the request.

**Besides the grammar.** Control tokens other than end-of-generation are never allowed: Hearth's
text writes nothing for them, while llama.cpp's grammar matches their spelled-out text. End of
generation is allowed only when the grammar is complete (llama.cpp's rule). When the prompt opened a
reasoning block, the constraint waits (:class:`ReasoningGate`) until the model closes it, with end of
generation banned meanwhile (an answer that ends while reasoning would have no JSON at all), and the
grammar then allows up to two blank characters before its start.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from engine import protocol as p
from engine.backends.backend import GrammarState, ModelBackend
from engine.backends.llama_grammar import grammar_text
from engine.decoding.reasoning import CLOSE, ReasoningStart
from engine.decoding.sampling import SamplingParams

BLOCKS = (1, 64, 1024)  # the best values asked about first, in turn; then the whole vocabulary


class ConstraintStuck(RuntimeError):
    """No token of the vocabulary is allowed where the answer stands."""


def settled(values: np.ndarray, bound: float, n_unasked: int, params: SamplingParams) -> bool:
    """Whether the transforms over the allowed tokens found so far (``values``, sorted descending)
    equal those over the fully masked row, whatever the ``n_unasked`` tokens not asked about are
    (each has a value below ``bound``)."""
    if n_unasked == 0:
        return True
    if values.size == 0:
        return False
    if params.greedy or 0 < params.top_k <= values.size:
        return True
    room = n_unasked if params.top_k <= 0 else min(n_unasked, params.top_k - values.size)  # unasked that could join
    best = float(values[0])
    by_min_p = params.min_p > 0 and bound <= best + math.log(params.min_p)  # the unasked all fall below min-p's cut
    if params.top_p >= 1.0:
        return by_min_p
    weights = np.exp(np.asarray(values, dtype=np.float64) - best)
    alone, most = _top_p_count(weights, 0.0, params.top_p), _top_p_count(weights, room * math.exp(bound - best),
                                                                          params.top_p)
    if alone == most and most <= values.size:
        return True  # top-p cuts at the same place, before the unasked, however much they weigh
    kept_by_min_p = int(np.count_nonzero(values >= best + math.log(params.min_p))) if by_min_p else values.size + 1
    return by_min_p and alone >= kept_by_min_p  # min-p cuts first, wherever top-p would


def _top_p_count(weights: np.ndarray, tail: float, top_p: float) -> int:
    """How many of the candidates (relative weights, descending) top-p keeps with ``tail`` more weight
    below them (as :func:`engine.decoding.sampling._top_p` counts); more than ``weights.size`` when it
    would keep some of the tail."""
    cumulative = np.cumsum(weights / (weights.sum() + tail))  # as _top_p computes it when tail is 0
    return int(np.searchsorted(cumulative, top_p, side="left")) + 1


class ReasoningGate:
    """Whether the model has closed the reasoning block the prompt opened: the text of its tokens so far
    ends with ``</think>`` (the text the answer's splitter reads, engine.decoding.reasoning)."""

    MARKER = CLOSE.encode()

    def __init__(self, piece: Callable[[int], bytes]) -> None:
        self.piece = piece
        self.tail = b""
        self.passed = False

    def see(self, token: int) -> None:
        self.tail = (self.tail + self.piece(token))[-len(self.MARKER):]
        self.passed = self.tail == self.MARKER


class Constraint:
    """One answer's grammar state and the tokens it never allows (see the module's docstring)."""

    def __init__(self, state: GrammarState, banned: np.ndarray, eog: np.ndarray, gate: ReasoningGate | None = None,
                 blocks: tuple[int, ...] = BLOCKS) -> None:
        """``banned``, ``eog``: boolean masks over the vocabulary (control tokens other than end of
        generation; end of generation)."""
        self.state, self.banned, self.eog, self.gate, self.blocks = state, banned, eog, gate, blocks
        self.asked = 0  # tokens asked about (for the benches: how much the blocks saved)

    @property
    def masking(self) -> bool:
        return self.gate is None or self.gate.passed

    def waiting(self, penalized: np.ndarray) -> np.ndarray:
        """The row while the model reasons: anything but the end of generation."""
        row = np.array(penalized, dtype=np.float64)
        row[self.eog] = -np.inf
        return row

    def candidates(self, penalized: np.ndarray, params: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
        """The allowed ids sorted by value, descending (ties by id), and their values: all that the
        transforms of ``params`` could keep from the fully masked row."""
        row = np.asarray(penalized)
        ids, values = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        above = np.inf  # every id with a value at least this was asked about
        for size in (*self.blocks, row.size):
            bound = self._bound(row, size)
            asked = row >= bound
            new = np.flatnonzero(asked & (row < above))
            found = new[self._allows(new, row)]
            order = np.lexsort((found, -row[found]))
            ids, values = np.concatenate([ids, found[order]]), np.concatenate([values, row[found[order]]])
            above = bound
            if settled(values, bound, row.size - int(np.count_nonzero(asked)), params):
                break
        if ids.size == 0:
            raise ConstraintStuck("the model's vocabulary has no token the answer's schema or grammar allows here")
        return ids, values

    @staticmethod
    def _bound(row: np.ndarray, size: int) -> float:
        """The value the ``size`` best of ``row`` reach (-inf: the whole row)."""
        if size >= row.size:
            return -np.inf
        if size == 1:
            return float(row.max())
        return float(np.partition(row, row.size - size)[row.size - size])

    def _allows(self, ids: np.ndarray, row: np.ndarray) -> np.ndarray:
        self.asked += ids.size
        usable = ~self.banned[ids] & np.isfinite(row[ids])
        allowed = np.zeros(ids.size, dtype=bool)
        if usable.any():
            allowed[usable] = self.state.allowed(ids[usable])
        return allowed

    def took(self, token: int) -> None:
        """``token`` was chosen (from a distribution this constraint masked): advance past it. A token
        it could not have allowed raises RuntimeError (the state's ``accept`` checks the grammar)."""
        if not self.masking:
            self.gate.see(token)
            return
        if self.banned[token]:
            raise RuntimeError(f"token {token} was chosen where the answer's grammar does not allow it")
        if not self.eog[token]:
            self.state.accept(token)
        elif not self.state.allowed(np.array([token]))[0]:
            raise RuntimeError("the answer was ended where its grammar does not allow it to end")

    def close(self) -> None:
        self.state.close()


ConstraintFactory = Callable[[], Constraint]


def build_constraint(model: ModelBackend, spec: p.OutputConstraint, reasoning: ReasoningStart,
                     banned: np.ndarray, eog: np.ndarray) -> ConstraintFactory:
    """A maker of one answer's :class:`Constraint` for ``spec``; the grammar is made and read once
    here, so a schema or grammar that cannot be used is refused (ConstraintRefused, a ValueError)
    before the prompt is read. ``banned``, ``eog``: the model's masks (ModelSession.constraint_masks)."""
    gated = reasoning == "open"
    text, root = grammar_text(spec, after_reasoning=gated)
    model.grammar(text, root).close()

    def make() -> Constraint:
        return Constraint(model.grammar(text, root), banned, eog, ReasoningGate(model.piece) if gated else None)

    return make
