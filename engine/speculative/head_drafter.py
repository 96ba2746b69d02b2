"""Chain drafting with a head that follows the target: what the MTP and EAGLE-3 drafters share.

Both heads guess the token after a token from a pair: that token and a row of the target's state
at the position before it (the MTP head reads the target's hidden state ``h``, the EAGLE-3 head
``g``, its fusion of three of the target's layers). A head row for the target's token at position
p therefore needs the target's row at p - 1, and gives logits for the token at p + 1 and the head's
own output row, which stands in for the target's row at p in the next chained guess.

**Following the target.** While attached, the drafter runs after every decode of sequence 0
(``LlamaContext.after_decode``): it reads the decoded rows' states (:meth:`HeadDrafter._target_rows`),
keeps them (the last decode's only: ``_rows`` from position ``_rows_start``) and writes the head
rows whose pair is complete: each decoded token with the row before it, which for the batch's
first token is the previous decode's last row. Without that row the batch's first token ends no
head row. The last row of a decode waits for the token after it (the next decode, or the pending
token when drafting). This "catch-up" fills the head's KV cache.

**Drafting** after the pending token ``t`` at position n: the head row ``(t, row n-1)`` gives d1 and
the head's own row, ``(d1, that row)`` gives d2, and so on (:meth:`HeadDrafter._step`, one head row
each). The draft rows are then dropped: the verify batch brings the real rows in through the
catch-up. After a partial acceptance (``settle``) the target holds positions 0..m-1: head rows for
tokens from m on and kept target rows from m on are dropped.

**Each head's own rules** are the subclass's: how the target's rows are captured and read
(``_capture``, ``_target_rows``), where the head row for the target's token at p goes in the head's
cache (``p - lag``: the MTP head at p, the EAGLE-3 head at p - 1, llama.cpp's position of the ``g``
it pairs with), and how rows are written there (``_head_rows``: whether a cache that stops short of
that position may go on past the gap). The head context itself is a
:class:`engine.backends.head_context.HeadContext`.

**Only a long read's tail.** Head rows are written when the head is next needed (a draft, a
settle), not at each decode: the pairs wait in ``_waiting``, which keeps the last
:data:`FOLLOW_TAIL` of them. A long prompt's earlier rows would cost the head a decode per row
(a share of a hybrid's prompt reading: docs/performance.md, "Measurements behind the design") for
guesses only a little sharper; the head's cache then starts at the tail, as after a restored
snapshot. The target's prompt chunks before that tail are pruned
(:meth:`engine.backends.llama_context.LlamaContext.decode`): they output no rows, and the head
forgets what it was following.

Idle (auto-off) rounds stop the following: the target then pays no copies of its rows and the head
no decodes. Exactness never depends on the head: the verifier decides every token. Rows the head
never saw (a request restored from a snapshot, idle rounds) only make its guesses worse.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from engine.backends.head_context import HeadContext
from engine.decoding.sampling import SamplingParams
from engine.models.session import FULL_ROWS_TAIL, ModelSession
from engine.speculative.proposer import Draft, Proposer, pick_draft_token, top_tokens


FOLLOW_TAIL = FULL_ROWS_TAIL  # the most (token, row) pairs of the target's decodes the head catches up on at once


class HeadDrafter(Proposer):
    """A drafter whose head follows the target's decodes and chains guesses from its rows."""

    lag: int  # the head row for the target's token at position p goes at position p - lag

    def __init__(self, session: ModelSession, head: HeadContext, *, sampling: SamplingParams,
                 rng: np.random.Generator, p_min: float) -> None:
        self.session, self.head = session, head
        self.sampling, self.rng, self.p_min = sampling, rng, p_min
        self._rows = np.zeros((0, head.n_embd), dtype=np.float32)  # the last target decode's rows
        self._rows_start = 0  # position of its first row
        self._waiting: list[tuple[np.ndarray, np.ndarray, int]] = []  # head rows not written yet: tokens, rows, position
        self._attached = False

    def configure(self, sampling: SamplingParams, rng: np.random.Generator) -> None:
        self.sampling, self.rng = sampling, rng

    # -- each head's own rules -------------------------------------------------------------------

    @abstractmethod
    def _capture(self, on: bool) -> None:
        """Have the target keep (or stop keeping) what ``_target_rows`` reads at each decode."""

    @abstractmethod
    def _target_rows(self, n_rows: int, first: int = 0) -> np.ndarray:
        """The rows the head pairs tokens with: rows ``first..first+n_rows-1`` of the target's last
        decode (a copy)."""

    @abstractmethod
    def _head_rows(self, tokens, rows: np.ndarray, position: int, *, all_logits: bool = False) -> None:
        """Head rows ``(tokens[i], rows[i])`` at head positions ``position + i``, replacing what the
        head's cache holds from ``position`` on."""

    # -- following the target --------------------------------------------------------------------

    def attach(self) -> None:
        """Start following the target's decodes, with an empty head (a request starts)."""
        self.head.clear()
        self._rows = self._rows[:0]
        self._waiting.clear()
        self._follow_target(True)

    def detach(self) -> None:
        """Stop following: the target decodes without the head's cost."""
        self._follow_target(False)

    def _follow_target(self, on: bool) -> None:
        if on == self._attached:
            return
        self._capture(on)
        self.session.context.after_decode = self._follow if on else None
        self._attached = on
        self._waiting.clear()  # rows it will not see now only make its guesses worse

    def _row_at(self, position: int) -> np.ndarray | None:
        """The target's row at ``position``, if it came out of its last decode."""
        index = position - self._rows_start
        return self._rows[index] if 0 <= index < len(self._rows) else None

    def _follow(self, tokens, start: int, seq_id: int, first_row: int = 0) -> None:
        if seq_id != 0:
            return
        if self.session.context.pruned:  # a prompt chunk before the tail: no rows came out of it
            self._rows = self._rows[:0]
            self._waiting.clear()
            return
        previous = self._row_at(start - 1)
        rows = self._target_rows(len(tokens), first_row)
        self._rows, self._rows_start = rows, start
        tokens = np.asarray(tokens, dtype=np.int32)
        if previous is not None:
            self._wait(tokens, np.concatenate([previous[None, :], rows[:-1]]), start - self.lag)
        elif len(tokens) > 1:  # no row before this batch: its first token ends no head row
            self._wait(tokens[1:], rows[:-1], start + 1 - self.lag)

    def _wait(self, tokens: np.ndarray, rows: np.ndarray, position: int) -> None:
        """Keep head rows to write later, the last FOLLOW_TAIL of them."""
        self._waiting.append((tokens, rows, position))
        excess = sum(len(t) for t, _, _ in self._waiting) - FOLLOW_TAIL
        while excess > 0:
            tokens, rows, position = self._waiting[0]
            if len(tokens) <= excess:
                self._waiting.pop(0)
            else:
                self._waiting[0] = (tokens[excess:], rows[excess:], position + excess)
            excess -= min(excess, len(tokens))

    def _catch_up(self) -> None:
        """Write the head rows waiting (before the head drafts, or is cut back)."""
        for tokens, rows, position in self._waiting:
            self._head_rows(tokens, rows, position)
        self._waiting.clear()

    def _drop_from(self, position: int) -> None:
        """Forget the head rows of the target's tokens at ``position`` and after."""
        self._catch_up()
        self.head.truncate(position - self.lag)

    # -- the Proposer interface ------------------------------------------------------------------

    def reset(self) -> None:
        self.attach()

    def finish(self) -> None:
        self.detach()

    def set_active(self, active: bool) -> None:
        """While auto-off has drafting idle the head stops following (its cost is a feature copy and a
        decode per token); when drafting is probed again it picks up from there, missing the rows in
        between."""
        self._follow_target(active)

    def _step(self, token: int, row: np.ndarray, position: int) -> tuple[np.ndarray, np.ndarray]:
        """One head row: ``token``, at the target's ``position``, with ``row`` (the target's or the head's
        row before it). Its logits (a view, valid until the next decode) and the head's next row."""
        self._head_rows([token], row[None, :], position - self.lag, all_logits=True)
        return self.head.logits(-1), self.head.next_hidden(-1)

    def propose(self, history: list[int], k: int) -> Draft:
        position = len(history) - 1  # where the pending token goes
        row = self._row_at(position - 1)
        self._catch_up()
        draft = Draft()
        if row is None:
            return draft  # the head has not seen the target's last state yet: decode plainly once
        token = history[-1]
        for i in range(k):
            logits, row = self._step(token, row, position + i)
            token, q, confident = pick_draft_token(logits, self.sampling, self.rng, self.p_min)
            if not confident and draft.tokens:
                break
            draft.tokens.append(token)
            draft.q.append(q)
        self._drop_from(position)  # the verify batch brings the real rows in
        return draft

    def propose_paths(self, history: list[int], k: int, width: int) -> list[Draft]:
        """The head's ``width`` likeliest first guesses, each followed by its greedy chain of ``k``
        (point masses: a tree's candidates are guesses, whatever the sampling)."""
        position = len(history) - 1
        row = self._row_at(position - 1)
        if width < 2 or row is None:
            return [self.propose(history, k)]
        self._catch_up()
        logits, first_row = self._step(history[-1], row, position)
        paths = []
        for first in top_tokens(logits, width):
            tokens, row = [first], first_row
            for i in range(1, k):
                logits, row = self._step(tokens[-1], row, position + i)
                tokens.append(int(np.argmax(logits)))
            paths.append(Draft(tokens, [None] * len(tokens)))
        self._drop_from(position)
        return paths

    def follow_path(self, tokens: list[int], start: int, first_row: int) -> None:
        """A tree round decoded ``tokens`` from ``start`` on as rows ``first_row..`` of its batch, on
        the path that won: follow them as if the trunk had decoded them alone."""
        if self._attached:
            self._follow(tokens, start, 0, first_row)

    def settle(self, history: list[int]) -> None:
        """The target holds ``history`` (positions 0..m-1): drop what the head has past it."""
        self._drop_from(len(history))
        self._rows = self._rows[:max(0, len(history) - self._rows_start)]

    def close(self) -> None:
        self.detach()
        self.head.close()
