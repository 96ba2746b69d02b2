"""Drafting with the target's own MTP head (Qwen3.5's "nextn" block).

The head needs, for each position p, the token ``x_p`` and the target's hidden state ``h_{p-1}``.
So it follows the target: after every decode of sequence 0 the target's hidden states are read
and the head decodes the matching rows (token ``x_p``, position p, ``h_{p-1}``), which fills its
own KV cache — the "catch-up". To draft after the pending token ``t`` at position n it decodes
``(t, h_{n-1})`` and takes its guess d1, then ``(d1, its own hidden state)`` for d2, and so on; the
draft rows are then dropped, and the target's verify batch brings the real rows in through the
catch-up. After a partial acceptance the head's rows past the kept tokens are dropped and the
hidden state to draft from is the target's at the last kept position.

Exactness never depends on the head: the verifier decides every token. Positions the head never
saw (a conversation restored from a snapshot) only make its guesses worse, not wrong.
"""

from __future__ import annotations

import numpy as np

from engine.backends.llama_mtp import MtpContext, hidden_states, output_hidden_states
from engine.sampling import SamplingParams
from engine.session import ModelSession
from engine.speculative.proposer import Draft, Proposer, pick_draft_token


class MtpHeadMissing(ValueError):
    """The model has no MTP head; the message says what to use instead."""


class MtpDrafter(Proposer):
    kind = "mtp"

    def __init__(self, session: ModelSession, *, sampling: SamplingParams, rng: np.random.Generator,
                 p_min: float = 0.1) -> None:
        if not session.model.has_mtp:
            raise MtpHeadMissing(f"{session.name} has no MTP head (no nextn layers); "
                                 "draft with lookup or model:PATH instead")
        self.session = session
        self.head = MtpContext(session.context)
        self.sampling, self.rng, self.p_min = sampling, rng, p_min
        self._hidden = np.zeros((0, self.head.n_embd), dtype=np.float32)  # the last target decode's rows
        self._hidden_start = 0  # position of its first row
        self._attached = False

    def configure(self, sampling: SamplingParams, rng: np.random.Generator) -> None:
        self.sampling, self.rng = sampling, rng

    # -- following the target --------------------------------------------------------------------

    def attach(self) -> None:
        """Start following the target's decodes, with an empty head (a request starts)."""
        self.head.clear()
        self._hidden = self._hidden[:0]
        self._follow_target(True)

    def detach(self) -> None:
        """Stop following: the target decodes without the head's cost."""
        self._follow_target(False)

    def _follow_target(self, on: bool) -> None:
        if on == self._attached:
            return
        output_hidden_states(self.session.context, on)
        self.session.context.after_decode = self._follow if on else None
        self._attached = on

    def _hidden_at(self, position: int) -> np.ndarray | None:
        """The target's hidden state at ``position``, if it came out of its last decode."""
        index = position - self._hidden_start
        return self._hidden[index] if 0 <= index < len(self._hidden) else None

    def _follow(self, tokens, start: int, seq_id: int) -> None:
        if seq_id != 0:
            return
        previous = self._hidden_at(start - 1)
        hidden = hidden_states(self.session.context, len(tokens))
        self._hidden, self._hidden_start = hidden, start
        tokens = np.asarray(tokens, dtype=np.int32)
        self.head.truncate(start if previous is not None else start + 1)
        if previous is not None:
            rows = np.concatenate([previous[None, :], hidden[:-1]])
            self.head.decode(tokens, rows, start)
        elif len(tokens) > 1:  # no state before this batch: its first token cannot be a head row
            self.head.decode(tokens[1:], hidden[:-1], start + 1)

    # -- the Proposer interface ------------------------------------------------------------------

    def reset(self) -> None:
        self.attach()

    def finish(self) -> None:
        self.detach()

    def set_active(self, active: bool) -> None:
        """While auto-off has drafting idle the head stops following (its cost is a decode per token);
        when drafting is probed again it picks up from there, missing only the rows in between."""
        self._follow_target(active)

    def propose(self, history: list[int], k: int) -> Draft:
        position = len(history) - 1  # where the pending token goes
        hidden = self._hidden_at(position - 1)
        draft = Draft()
        if hidden is None:
            return draft  # the head has not seen the target's last state yet: decode plainly once
        self.head.truncate(position)
        token = history[-1]
        for i in range(k):
            self.head.decode([token], hidden[None, :], position + i, all_logits=True)
            token, q, confident = pick_draft_token(self.head.logits(-1), self.sampling, self.rng, self.p_min)
            if not confident and draft.tokens:
                break
            draft.tokens.append(token)
            draft.q.append(q)
            hidden = self.head.hidden(-1)
        self.head.truncate(position)  # the verify batch brings the real rows in
        return draft

    def settle(self, history: list[int]) -> None:
        self.head.truncate(len(history))
        keep = len(history) - self._hidden_start
        self._hidden = self._hidden[:max(0, keep)]

    def close(self) -> None:
        self.detach()
        self.head.close()
