"""Chain drafting with an EAGLE-3 head (a separate ``eagle3`` GGUF made for the target).

The head reads three of the target's layers. For each target position p it turns their inputs
into one vector ``g[p]`` (its encoder, ``fc``), and a head row at position p pairs ``g[p]`` with
the *next* token ``x[p+1]``: from it the head guesses ``x[p+2]`` and gives its own ``g`` for a
further guess. So, like the MTP drafter (:mod:`engine.speculative.mtp`), it follows the target
(the machinery both share is :class:`engine.speculative.head_drafter.HeadDrafter`): after every
decode of sequence 0 it reads the decoded rows' features, encodes them, and decodes the head rows
whose next token is known: ``(x[p+1], g[p])`` for p from the row before the batch to the batch's
second-to-last row. The last row's ``g`` waits for the token after it. The head row of the target's
token at p therefore sits at p - 1 (``lag`` 1).

To draft after the pending token ``t`` at position n it decodes ``(t, g[n-1])`` at n-1, takes the
guess d1, then ``(d1, the head's own g)`` at n for d2, and so on. The draft rows are then dropped:
the verify batch brings the real rows in through the catch-up. After a partial acceptance the
target keeps positions up to m-1 (``settle``): head rows up to m-2 and ``g`` rows up to m-1 stay.

Rollback of a hybrid target is the session's (``n_rs_seq`` planes, ``SpeculativeSource.settle``);
the head itself has only a KV cache, truncated by position. Exactness never depends on the head:
the verifier decides every token. Rows the head never saw (a request restored from a snapshot,
rounds while auto-off had it idle) only make its guesses worse: it then restarts its cache there
(its plain RoPE takes no position that does not follow its cache; see :meth:`Eagle3Drafter._head_rows`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.backends.llama_eagle3 import Eagle3Head
from engine.decoding.sampling import SamplingParams
from engine.models.session import ModelSession
from engine.speculative.draft_files import check_draft_file, held_by
from engine.speculative.head_drafter import HeadDrafter


class Eagle3Drafter(HeadDrafter):
    kind = "eagle3"
    lag = 1  # the row (x[p+1], g[p]) goes at p

    def __init__(self, path: Path, session: ModelSession, *, sampling: SamplingParams, rng: np.random.Generator,
                 p_min: float = 0.1) -> None:
        self.path = Path(path)
        # ModelLoadError naming the file and what is wrong with it: a damaged file, tensors llama.cpp cannot
        # compute with (they would kill the worker), or no room for it in memory
        check_draft_file(self.path, "eagle3", n_ctx=session.n_ctx, held_bytes=held_by(session))
        head = Eagle3Head(self.path, session.context)  # Eagle3Incompatible if made for another target
        super().__init__(session, head, sampling=sampling, rng=rng, p_min=p_min)

    def _capture(self, on: bool) -> None:
        self.head.features.capture(on)

    def _target_rows(self, n_rows: int, first: int = 0) -> np.ndarray:
        """``g`` of the decoded rows: their three layers' inputs, fused by the head's encoder."""
        return self.head.encode(self.head.features.read(first + n_rows)[first:])

    def _head_rows(self, tokens, g: np.ndarray, position: int, *, all_logits: bool = False) -> None:
        """Head rows from ``position`` on; a cache that stops short of it restarts (rows it missed)."""
        if self.head.pos_max() + 1 < position:
            self.head.clear()
        self.head.truncate(position)
        self.head.decode(tokens, g, position, all_logits=all_logits)
