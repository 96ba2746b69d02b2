"""A tree of drafts in llama.cpp's memory: one sequence per path, the trunk kept exact.

Sequence 0 is the trunk (what the answer has read). For a tree round, paths 1..W-1 become copies of
it (``seq_cp`` in a unified attention cache shares the history's cells; each recurrent state gets
its own cell when the path is decoded), and one batch holds every path's pending token and drafts,
path after path. Each path's rows see the history, then their own path: with flash attention
llama.cpp skips the cells a row may not see, so every row is computed exactly as a chain verify
of that path would compute it. Path 0 is the drafter's first choice; it stays on sequence 0.

Two things in llama.cpp need care:

- **A pending rollback is not copied.** After a partial acceptance the trunk's recurrent state is
  rolled back through its snapshot planes, applied at the trunk's next decode, and only for the
  trunk: a copy decodes from the live plane. So when a rollback is pending, the copies get the
  trunk's logical state through a recurrent-only state blob (``PARTIAL_ONLY``).
- **The order of the trunk's cells.** The trunk's cells must stay in position order for the answer
  to match plain decoding: when a later token took a free cell before accepted ones, SmolLM2's next
  logits differed from plain decoding by up to 1.5 (not a rounding difference). When a path other
  than 0 wins, its accepted cells lie after path 0's and the earlier paths' cells; freeing those
  would let later tokens fill the holes before them. So they are *parked* on a sequence nothing
  reads, and the state is compacted (saved and reloaded, which lays the cells out in order again)
  when the request ends.
"""

from __future__ import annotations

from engine.backends.llama_context import STATE_PARTIAL_ONLY, LlamaContext


class TreeState:
    """The sequences of a tree round on one context (made with ``n_seq_max`` >= width + 1)."""

    def __init__(self, context: LlamaContext, recurrent: bool) -> None:
        self.context, self.recurrent = context, recurrent
        self.width = context.settings.n_seq_max - 1  # the last sequence holds parked cells
        self.parked_seq = self.width
        self.parked = 0  # cells parked since the last compaction

    def decode(self, pending: int, paths: list[list[int]], start: int) -> None:
        """Copy the trunk to paths 1.., then decode every path's pending token and drafts at once."""
        self._branch(len(paths))
        depth = len(paths[0])
        tokens, positions, seqs = [], [], []
        for path, drafts in enumerate(paths):
            tokens += [pending, *drafts]
            positions += range(start, start + depth + 1)
            seqs += [path] * (depth + 1)
        self.context.decode_rows(tokens, positions, seqs)

    @staticmethod
    def row(path: int, depth: int, path_depth: int) -> int:
        """The batch row of ``path``'s token at ``depth`` (0 = the pending token) when every path
        drafts ``path_depth`` tokens."""
        return path * (path_depth + 1) + depth

    def _branch(self, n_paths: int) -> None:
        context = self.context
        blob = None
        if self.recurrent and 0 in context.rollback_pending:
            blob = context.state_get(0, STATE_PARTIAL_ONLY)
        for path in range(1, n_paths):
            context.seq_cp(0, path)
            if blob is not None and not context.state_set(blob, path, STATE_PARTIAL_ONLY):
                raise RuntimeError("llama.cpp refused to copy the recurrent state to a draft path")

    def settle(self, winner: int, n_paths: int, start: int, depth: int, keep: int) -> None:
        """Leave the trunk holding positions ``..keep-1`` of path ``winner``; drop the other paths."""
        end = start + depth + 1
        if winner == 0:
            if keep < end:
                self._remove(0, keep)
        else:
            self._adopt(winner, start, end, keep)
        for path in range(1, n_paths):
            self.context.seq_rm(path, -1, -1)

    def _adopt(self, winner: int, start: int, end: int, keep: int) -> None:
        """Make path ``winner``'s accepted cells the trunk's (its pending cell equals the trunk's)."""
        context = self.context
        if keep < end:
            self._remove(winner, keep)
        blob = context.state_get(winner, STATE_PARTIAL_ONLY) if self.recurrent else None
        context.seq_cp(0, self.parked_seq, start + 1, end)
        for path in range(1, winner):
            context.seq_cp(path, self.parked_seq, start, end)
        context.seq_cp(winner, self.parked_seq, start, start + 1)  # its pending cell: the trunk keeps its own
        self.parked += (end - start - 1) + (winner - 1) * (end - start) + 1
        self._remove(0, start + 1)
        context.seq_cp(winner, 0, start + 1, keep)
        if blob is not None and not context.state_set(blob, 0, STATE_PARTIAL_ONLY):
            raise RuntimeError("llama.cpp refused to move the accepted path's recurrent state to the trunk")

    def _remove(self, seq: int, keep: int) -> None:
        if not self.context.seq_rm(seq, keep, -1):
            raise RuntimeError("llama.cpp refused to roll back the rejected draft tokens")

    def compact(self) -> None:
        """Free the parked cells and lay the trunk's cells out in order (save and reload the state)."""
        if not self.parked:
            return
        blob = self.context.state_get(0)
        self.context.clear()
        if not self.context.state_set(blob, 0):
            raise RuntimeError("llama.cpp refused to reload the answer's state after a tree round")
        self.parked = 0
