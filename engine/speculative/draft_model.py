"""Drafting with a second, smaller model that shares the target's vocabulary.

The draft model keeps its own context. Sequence 0 holds the target's accepted history (minus the
pending token); each round copies it to sequence 1 and drafts there one token at a time, so
rejected guesses are thrown away with sequence 1 and never need a rollback — which matters for a
hybrid draft model, whose recurrent state cannot be rolled back after single-token steps. At the
next round sequence 0 catches up with the newly accepted tokens in one batch. Greedy drafting
stops early when the draft model's own top probability falls below ``p_min``.

While auto-off has drafting idle the draft model reads nothing. When drafting is tried again it
does not read everything it missed (hundreds of tokens, as long to read as the probe is to run for
a draft model near the target's size): it starts over from the last :data:`REJOIN_TOKENS`, which is
what its next guesses lean on most. Sequence 0 then holds the history from ``start`` on, at
positions counted from there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.backends.base import ContextSettings, ModelLoadError
from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel
from engine.speculative.draft_files import check_draft_file
from engine.decoding.sampling import SamplingParams
from engine.speculative.proposer import Draft, Proposer, pick_draft_token, top_tokens

DRAFT_SEQ = 1
BRANCH_SEQ = 2  # a tree's paths start from here: the history and the pending token
REJOIN_TOKENS = 32  # the most a draft model reads of what it missed while drafting was off


class DraftIncompatible(ValueError):
    """The draft model cannot draft for this target; the message says why."""


def check_same_vocabulary(target: LlamaModel, draft: LlamaModel) -> None:
    if target.n_vocab != draft.n_vocab:
        raise DraftIncompatible(f"the draft model has {draft.n_vocab} tokens, the target {target.n_vocab}; "
                                "a draft model must share the target's vocabulary")
    for token in range(target.n_vocab):
        if target.token_text(token) != draft.token_text(token):
            raise DraftIncompatible(f"token {token} is {draft.token_text(token)!r} in the draft model but "
                                    f"{target.token_text(token)!r} in the target; they do not share a vocabulary")


class DraftModel(Proposer):
    kind = "model"

    def __init__(self, path: Path, target: LlamaModel, *, n_ctx: int, n_threads: int,
                 sampling: SamplingParams, rng: np.random.Generator, p_min: float = 0.1, held_bytes: int = 0) -> None:
        """``held_bytes``: what the worker holds already, for the memory check (engine.speculative.draft_files)."""
        check_draft_file(path, "model", n_ctx=n_ctx, held_bytes=held_bytes)
        self.model = LlamaModel(path)
        try:
            check_same_vocabulary(target, self.model)
            self.context = LlamaContext(self.model, ContextSettings(n_ctx=n_ctx, n_seq_max=3, n_threads=n_threads))
        except (DraftIncompatible, ModelLoadError):
            self.model.close()
            raise
        self.path = path
        self.sampling, self.rng, self.p_min = sampling, rng, p_min
        self.recurrent = self.model.facts().has_recurrent_state
        self.tokens: list[int] = []  # what sequence 0 holds: the history from ``start`` on
        self.start = 0
        self.idle = False  # drafting was off since the last catch-up
        self._warm_up()

    def _warm_up(self) -> None:
        """One throw-away decode on each sequence, so the first real round is not paying for
        llama.cpp's graph allocation (which would make auto-off judge drafting too harshly)."""
        for seq in (0, DRAFT_SEQ, BRANCH_SEQ):
            self.context.decode([0], 0, seq_id=seq)
        self.context.clear()

    def configure(self, sampling: SamplingParams, rng: np.random.Generator) -> None:
        self.sampling, self.rng = sampling, rng

    def propose(self, history: list[int], k: int) -> Draft:
        self._catch_up(history[:-1])
        context = self.context
        context.seq_rm(DRAFT_SEQ, -1, -1)
        context.seq_cp(0, DRAFT_SEQ)
        token, position, draft = history[-1], len(history) - 1 - self.start, Draft()
        for _ in range(k):
            context.decode([token], position, seq_id=DRAFT_SEQ)
            token, q, confident = pick_draft_token(context.logits(-1), self.sampling, self.rng, self.p_min)
            if not confident and draft.tokens:
                break
            draft.tokens.append(token)
            draft.q.append(q)
            position += 1
        return draft

    def propose_paths(self, history: list[int], k: int, width: int) -> list[Draft]:
        """The draft model's ``width`` likeliest first guesses, each followed by its greedy chain
        (point masses: a tree's candidates are guesses, whatever the sampling). Each path is drafted
        on a copy of the sequence that read the pending token, so it is read once."""
        if width < 2:
            return [self.propose(history, k)]
        self._catch_up(history[:-1])
        context, position = self.context, len(history) - 1 - self.start
        context.seq_rm(BRANCH_SEQ, -1, -1)
        context.seq_cp(0, BRANCH_SEQ)
        context.decode([history[-1]], position, seq_id=BRANCH_SEQ)
        paths = []
        for first in top_tokens(context.logits(-1), width):
            context.seq_rm(DRAFT_SEQ, -1, -1)
            context.seq_cp(BRANCH_SEQ, DRAFT_SEQ)
            tokens = [first]
            for i in range(1, k):
                context.decode([tokens[-1]], position + i, seq_id=DRAFT_SEQ)
                tokens.append(int(np.argmax(context.logits(-1))))
            paths.append(Draft(tokens, [None] * len(tokens)))
        return paths

    def _catch_up(self, history: list[int]) -> None:
        """Make sequence 0 hold ``history`` from ``start`` on."""
        common = 0
        for mine, theirs in zip(self.tokens, history[self.start:]):
            if mine != theirs:
                break
            common += 1
        if common < len(self.tokens):
            if self.recurrent or not self.context.seq_rm(0, common, -1):
                self._start_over(0)
            else:
                del self.tokens[common:]
        if self.idle and len(history) - self.start - len(self.tokens) > REJOIN_TOKENS:
            self._start_over(len(history) - REJOIN_TOKENS)
        self.idle = False
        read = self.start + len(self.tokens)
        for begin in range(read, len(history), self.context.settings.n_batch):
            chunk = history[begin : begin + self.context.settings.n_batch]
            self.context.decode(chunk, begin - self.start, seq_id=0)
            self.tokens.extend(chunk)

    def _start_over(self, start: int) -> None:
        self.context.seq_rm(0, -1, -1)
        self.tokens, self.start = [], start

    def prepare(self, history: list[int]) -> None:
        self._catch_up(history)

    def set_active(self, active: bool) -> None:
        self.idle |= not active

    def reset(self) -> None:
        pass  # the history is compared on every round; nothing to forget

    def close(self) -> None:
        self.context.close()
        self.model.close()
