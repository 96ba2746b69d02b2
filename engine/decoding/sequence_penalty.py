"""The sequence penalty: a token that would continue a run the answer already wrote becomes less likely.

The repeat penalty (:func:`engine.decoding.sampling.penalize_repeats`) lowers each *token* seen recently; a
small model's loops repeat *runs* of common tokens ("1 teaspoon ground …" down a recipe, "Don't
forget …" down a list), which a per-token penalty cannot tell from ordinary prose. This is the rule of
the DRY sampler (p-e-w, text-generation-webui; llama.cpp's ``dry_*`` settings), written here on the
host like the rest of :mod:`engine.decoding.sampling`:

* Take the answer so far. For each earlier place where its last token also stood, count how many
  tokens before it match the tokens before the end (the run so far); the token that followed there
  is the candidate that would repeat the run.
* A candidate whose run is at least ``allowed`` tokens long has ``multiplier * base ** (run - allowed)``
  taken off its logit (the longest run per candidate counts).
* A *sequence breaker* (a token whose text holds a line break, ``:``, ``"`` or ``*``) ends a run: runs
  never reach across one and a breaker is never penalised, so list items, dialogue and code lines can
  start alike.

It looks at the answer being written, not the prompt (like the repeat penalty: an answer may quote
the question; a restored snapshot and a fresh read give the same answer). A multiplier of 0 switches
it off. The speculative verifiers get each drafted position's own answer-so-far, so drafting stays
exact with it on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

BREAKER_TEXT = ("\n", ":", '"', "*")  # llama.cpp's default dry_sequence_breakers
DEFAULT_BASE = 1.75  # llama.cpp's dry_base: how fast the penalty grows with the run's length
DEFAULT_ALLOWED = 2  # llama.cpp's dry_allowed_length: runs this long go free
LONGEST_RUN = 48  # runs are counted up to this length (1.75 ** 46 is already beyond any logit)


class Breakers:
    """Which token ids are sequence breakers, for one model: asked of its pieces as tokens come up."""

    def __init__(self, piece: Callable[[int], bytes]) -> None:
        self._piece = piece
        self._known: dict[int, bool] = {}

    def __contains__(self, token: object) -> bool:
        if not isinstance(token, (int, np.integer)):
            return False
        token = int(token)
        if token not in self._known:
            text = self._piece(token).decode("utf-8", errors="replace")
            self._known[token] = any(mark in text for mark in BREAKER_TEXT)
        return self._known[token]


NO_BREAKERS: frozenset[int] = frozenset()


def run_lengths(answer: Sequence[int], breakers, longest: int = LONGEST_RUN) -> dict[int, int]:
    """For each token that would repeat a run of the answer's ending, the longest such run's length."""
    if len(answer) < 2 or answer[-1] in breakers:
        return {}
    tokens = np.asarray(answer, dtype=np.int64)
    end = tokens.size - 1
    runs: dict[int, int] = {}
    for start in np.flatnonzero(tokens[:-1] == tokens[-1]):
        follower = int(tokens[start + 1])
        if follower in breakers:
            continue
        run = 1
        while run < longest and start - run >= 0 and tokens[start - run] == tokens[end - run] \
                and int(tokens[start - run]) not in breakers:
            run += 1
        if run > runs.get(follower, 0):
            runs[follower] = run
    return runs


def penalize_sequences(logits: np.ndarray, answer: Sequence[int], multiplier: float, breakers,
                       base: float = DEFAULT_BASE, allowed: int = DEFAULT_ALLOWED) -> np.ndarray:
    """``logits`` with the sequence penalty for continuing a run of ``answer`` (a copy, or the input
    itself when nothing is penalised)."""
    if multiplier <= 0:
        return logits
    runs = {token: run for token, run in run_lengths(answer, breakers).items() if run >= allowed}
    if not runs:
        return logits
    out = np.array(logits, dtype=np.float64)
    ids = np.fromiter(runs, dtype=np.int64, count=len(runs))
    lengths = np.fromiter(runs.values(), dtype=np.float64, count=len(runs))
    out[ids] -= multiplier * np.power(base, lengths - allowed)
    return out
