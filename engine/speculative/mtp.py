"""Drafting with the target's own MTP head (Qwen3.5's "nextn" block).

The head needs, for each position p, the token ``x_p`` and the target's hidden state ``h_{p-1}``.
So it follows the target (the machinery it shares with the EAGLE-3 drafter is
:class:`engine.speculative.head_drafter.HeadDrafter`): after every decode of sequence 0 the
target's hidden states are read and the head decodes the matching rows (token ``x_p``, position p,
``h_{p-1}``; ``lag`` 0), which fills its own KV cache — the "catch-up". To draft after the pending
token ``t`` at position n it decodes ``(t, h_{n-1})`` and takes its guess d1, then ``(d1, its own
hidden state)`` for d2, and so on; the draft rows are then dropped, and the target's verify batch
brings the real rows in through the catch-up. After a partial acceptance the head's rows past the
kept tokens are dropped and the hidden state to draft from is the target's at the last kept position.

Exactness never depends on the head: the verifier decides every token. Positions the head never
saw (a conversation restored from a snapshot, rounds while auto-off had it idle) only make its
guesses worse, not wrong. Its rows may go past such a gap: the head is part of the qwen35 target,
whose M-RoPE lets llama.cpp take positions that jump forward.
"""

from __future__ import annotations

import numpy as np

from engine.backends.llama_mtp import MtpContext, hidden_states, output_hidden_states
from engine.decoding.sampling import SamplingParams
from engine.models.session import ModelSession
from engine.speculative.head_drafter import HeadDrafter


class MtpHeadMissing(ValueError):
    """The model has no MTP head; the message says what to use instead."""


class MtpDrafter(HeadDrafter):
    kind = "mtp"
    lag = 0  # the row (x_p, h_{p-1}) goes at p

    def __init__(self, session: ModelSession, *, sampling: SamplingParams, rng: np.random.Generator,
                 p_min: float = 0.1) -> None:
        if not session.model.has_mtp:
            raise MtpHeadMissing(f"{session.name} has no MTP head (no nextn layers); "
                                 "draft with lookup or model:PATH instead")
        super().__init__(session, MtpContext(session.context), sampling=sampling, rng=rng, p_min=p_min)

    def _capture(self, on: bool) -> None:
        output_hidden_states(self.session.context, on)

    def _target_rows(self, n_rows: int, first: int = 0) -> np.ndarray:
        """The target's hidden states of the decoded rows (after its final norm)."""
        return hidden_states(self.session.context, first + n_rows)[first:]

    def _head_rows(self, tokens, hidden: np.ndarray, position: int, *, all_logits: bool = False) -> None:
        """Head rows from ``position`` on, also past a gap in the head's cache (M-RoPE takes it)."""
        self.head.truncate(position)
        self.head.decode(tokens, hidden, position, all_logits=all_logits)
