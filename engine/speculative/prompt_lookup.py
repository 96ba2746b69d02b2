"""Prompt-lookup decoding: draft by copying what followed the last time the recent tokens appeared.

Saxena's prompt lookup decoding (2023) replaces the draft model with a string search. Take the last
``n`` tokens of the history (prompt, any attached document and everything generated so far), find
the most recent *earlier* place where the same ``n`` tokens occur, and propose the tokens that
followed them there. Longer n-grams are tried first (``max_ngram`` down to ``min_ngram``) because a
longer match is more likely to continue the same way. The draft is a deterministic guess, so every
``q`` is ``None`` (a point mass) and the verifier keeps the target's distribution exactly.

It costs no model and no memory traffic, and pays off when the output repeats its input: answering
about a document, quoting or summarising with the source's wording, editing code (most of the file
comes back unchanged), or reformatting. In free-form chat it rarely matches and proposes nothing,
so the decode step runs as if speculation were off.

The search is an index, not a scan: a dict from each n-gram to the position of the token that
followed its latest occurrence. Only n-grams that already have a following token are indexed, so
the history's own suffix never matches itself. Each call indexes just the tokens added since the
previous call, so a step costs O(new tokens + max_ngram) even on a 100k-token history. If the
history shrank or its tail no longer matches what was indexed (a new conversation, an edit), the
index is rebuilt. The check looks at the length and a few tokens at the head and the tail, so a
change hidden in the middle is not noticed; call :meth:`reset` when a new generation starts.
Memory is about ``max_ngram - min_ngram + 1`` dict entries per history token.
"""

from __future__ import annotations

from engine.speculative.proposer import Draft, Proposer


class PromptLookup(Proposer):
    kind = "lookup"
    free = True  # a dict lookup: auto-off watches its guesses while drafting is off
    check_tokens = 8  # head and tail tokens compared to tell a grown history from a changed one

    def __init__(self, max_ngram: int = 4, min_ngram: int = 2) -> None:
        if min_ngram < 1 or max_ngram < min_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.positions_indexed = 0  # history positions ever added to the index (for tests, stats)
        self.rebuilds = 0
        self.reset()

    def reset(self) -> None:
        # n-gram tuple -> index of the token that followed its most recent indexed occurrence.
        # Tuples of different lengths never compare equal, so one dict holds every n.
        self._next: dict[tuple[int, ...], int] = {}
        self._length = 0  # the history length last synced to
        self._head: list[int] = []
        self._tail: list[int] = []

    def settle(self, history: list[int]) -> None:
        self._sync(history)

    def propose(self, history: list[int], k: int) -> Draft:
        self._sync(history)
        end = len(history)
        if k <= 0:
            return Draft()
        for n in range(min(self.max_ngram, end - 1), self.min_ngram - 1, -1):
            follower = self._next.get(tuple(history[end - n:end]))
            if follower is not None:
                tokens = [int(t) for t in history[follower:min(follower + k, end)]]
                return Draft(tokens, [None] * len(tokens))
        return Draft()

    def propose_paths(self, history: list[int], k: int, width: int) -> list[Draft]:
        """The continuations after the matches of each n-gram length, longest first, each
        different from those before it (a shorter n-gram often last occurred elsewhere)."""
        self._sync(history)
        end = len(history)
        paths: list[Draft] = []
        for n in range(min(self.max_ngram, end - 1), self.min_ngram - 1, -1):
            follower = self._next.get(tuple(history[end - n:end]))
            if follower is None or len(paths) == width:
                continue
            tokens = [int(t) for t in history[follower:min(follower + k, end)]]
            if all(tokens != path.tokens for path in paths):
                paths.append(Draft(tokens, [None] * len(tokens)))
        return paths

    def _sync(self, history: list[int]) -> None:
        """Bring the index up to ``history``: extend it when ``history`` grew, rebuild otherwise."""
        length = len(history)
        if length < self._length or not self._unchanged(history):
            self.rebuilds += 1
            self.reset()
        # The n-grams ending just before position e (1 <= e < length) have a follower, history[e].
        # Those with e < self._length are indexed already.
        first = max(self._length, 1)
        for e in range(first, length):
            for n in range(self.min_ngram, min(self.max_ngram, e) + 1):
                self._next[tuple(history[e - n:e])] = e
        self.positions_indexed += max(0, length - first)
        self._length = length
        self._head = list(history[:self.check_tokens])
        self._tail = list(history[max(0, length - self.check_tokens):length])

    def _unchanged(self, history: list[int]) -> bool:
        """Whether ``history`` still starts with what was indexed (checked at the head and tail)."""
        old = self._length
        if old == 0:
            return True
        return (list(history[:len(self._head)]) == self._head
                and list(history[old - len(self._tail):old]) == self._tail)
