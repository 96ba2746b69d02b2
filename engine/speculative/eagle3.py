"""Chain drafting with an EAGLE-3 head (a separate ``eagle3`` GGUF made for the target).

The head reads three of the target's layers. For each target position p it turns their inputs
into one vector ``g[p]`` (its encoder, ``fc``), and a head row at position p pairs ``g[p]`` with
the *next* token ``x[p+1]``: from it the head guesses ``x[p+2]`` and gives its own ``g`` for a
further guess. So, like the MTP drafter (:mod:`engine.speculative.mtp`), it follows the target:
after every decode of sequence 0 it reads the decoded rows' features, encodes them, and decodes
the head rows whose next token is known: ``(x[p+1], g[p])`` for p from the row before the batch
to the batch's second-to-last row. The last row's ``g`` waits for the token after it.

To draft after the pending token ``t`` at position n it decodes ``(t, g[n-1])`` at n-1, takes the
guess d1, then ``(d1, the head's own g)`` at n for d2, and so on. The draft rows are then dropped:
the verify batch brings the real rows in through the catch-up. After a partial acceptance the
target keeps positions up to m-1 (``settle``): head rows up to m-2 and ``g`` rows up to m-1 stay.

Rollback of a hybrid target is the session's (``n_rs_seq`` planes, ``SpeculativeSource.settle``);
the head itself has only a KV cache, truncated by position. Exactness never depends on the head:
the verifier decides every token. Rows the head never saw (a request restored from a snapshot,
rounds while auto-off had it idle) only make its guesses worse: it then restarts its cache there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.backends.llama_eagle3 import Eagle3Head
from engine.model_files import check_model_file
from engine.sampling import SamplingParams
from engine.session import ModelSession
from engine.speculative.proposer import Draft, Proposer, pick_draft_token


class Eagle3Drafter(Proposer):
    kind = "eagle3"

    def __init__(self, path: Path, session: ModelSession, *, sampling: SamplingParams, rng: np.random.Generator,
                 p_min: float = 0.1) -> None:
        self.session, self.path = session, Path(path)
        check_model_file(self.path)  # ModelLoadError naming the file and what is wrong with it
        self.head = Eagle3Head(self.path, session.context)  # Eagle3Incompatible if made for another target
        self.sampling, self.rng, self.p_min = sampling, rng, p_min
        self._g = np.zeros((0, self.head.n_embd), dtype=np.float32)  # the last target decode's g rows
        self._g_start = 0  # position of its first row
        self._attached = False

    def configure(self, sampling: SamplingParams, rng: np.random.Generator) -> None:
        self.sampling, self.rng = sampling, rng

    # -- following the target --------------------------------------------------------------------

    def attach(self) -> None:
        """Start following the target's decodes, with an empty head (a request starts)."""
        self.head.clear()
        self._g = self._g[:0]
        self._follow_target(True)

    def detach(self) -> None:
        self._follow_target(False)

    def _follow_target(self, on: bool) -> None:
        if on == self._attached:
            return
        self.head.features.capture(on)
        self.session.context.after_decode = self._follow if on else None
        self._attached = on

    def _g_at(self, position: int) -> np.ndarray | None:
        index = position - self._g_start
        return self._g[index] if 0 <= index < len(self._g) else None

    def _head_rows(self, tokens, g: np.ndarray, position: int, *, all_logits: bool = False) -> None:
        """Head rows from ``position`` on; a cache that stops short of it restarts (rows it missed)."""
        if self.head.pos_max() + 1 < position:
            self.head.clear()
        self.head.truncate(position)
        self.head.decode(tokens, g, position, all_logits=all_logits)

    def _follow(self, tokens, start: int, seq_id: int) -> None:
        if seq_id != 0:
            return
        previous = self._g_at(start - 1)
        g = self.head.encode(self.head.features.read(len(tokens)))
        self._g, self._g_start = g, start
        tokens = np.asarray(tokens, dtype=np.int32)
        if previous is not None:
            self._head_rows(tokens, np.concatenate([previous[None, :], g[:-1]]), start - 1)
        elif len(tokens) > 1:  # no g before this batch: its first token ends no head row
            self._head_rows(tokens[1:], g[:-1], start)

    # -- the Proposer interface ------------------------------------------------------------------

    def reset(self) -> None:
        self.attach()

    def finish(self) -> None:
        self.detach()

    def set_active(self, active: bool) -> None:
        """Idle (auto-off) rounds cost the target no feature copies and the head no decodes."""
        self._follow_target(active)

    def propose(self, history: list[int], k: int) -> Draft:
        position = len(history) - 1  # where the pending token goes
        g = self._g_at(position - 1)
        draft = Draft()
        if g is None:
            return draft  # the head has not seen the target's last state yet: decode plainly once
        token = history[-1]
        for i in range(k):
            self._head_rows([token], g[None, :], position - 1 + i, all_logits=True)
            token, q, confident = pick_draft_token(self.head.logits(-1), self.sampling, self.rng, self.p_min)
            if not confident and draft.tokens:
                break
            draft.tokens.append(token)
            draft.q.append(q)
            g = self.head.next_g(-1)
        self.head.truncate(position - 1)  # the verify batch brings the real rows in
        return draft

    def settle(self, history: list[int]) -> None:
        """The target holds ``history`` (positions 0..m-1): a head row needs the token after it."""
        self.head.truncate(len(history) - 1)
        self._g = self._g[:max(0, len(history) - self._g_start)]

    def close(self) -> None:
        self.detach()
        self.head.close()
