"""What the engine asks of an inference backend: a loaded model (:class:`ModelBackend`) and one
inference context over it (:class:`ContextBackend`).

These protocols name exactly what :class:`engine.models.session.ModelSession` and the code above it use on
the paths of loading a model, answering (``Complete``, ``Chat``, ``AnswerTurn``, with prompt-lookup
drafting), reading a document, cancelling, saving and restoring snapshots, measuring text and
unloading: the prompt code (:mod:`engine.templates.prompts`), generation (:mod:`engine.decoding.generation`), token
sources (:mod:`engine.speculative.token_sources`), drafting's choice (:mod:`engine.speculative.drafting`)
and snapshots (:mod:`engine.state.snapshot_cursor`, :mod:`engine.state.snapshot_keeper`). llama.cpp's
adapter (:class:`engine.backends.llama_cpp.LlamaModel`, :class:`engine.backends.llama_context.LlamaContext`)
satisfies them structurally, without inheriting; so does the deterministic fake the engine core's
fast tests load (``tests/fakes/fake_backend.py``, through ``EngineCore(open_model=...)``).

What they leave out needs llama.cpp itself: the drafting heads and the draft model (MTP, EAGLE-3,
a tree of drafts: hidden rows, multi-sequence batches, ``after_decode``), the NPU hand-off and
calibration's random tokens (``n_vocab``), and the thread budget :func:`engine.models.session.open_session`
gives a real context.

Contracts a backend keeps, which the types cannot say:

* token ids are ``0 <= id < facts().n_vocab``; :meth:`ModelBackend.piece` is the token's bytes in
  text (``b""`` for a control token), :meth:`ModelBackend.token_text` its text with control tokens
  spelled out (what a chat template writes);
* :meth:`ContextBackend.decode` of sequence 0 continues at ``start_pos`` = the tokens it holds; it
  raises ``RuntimeError`` when it cannot (the context is full) and
  :class:`engine.backends.llama_context.DecodeAborted` when ``abort`` turned true while it ran, with
  the micro-batches finished before that kept (a recurrent part may be half-written);
* a state blob is llama.cpp's per-sequence layout (:mod:`engine.state.seq_state`: header, the
  attention cells, then the recurrent part); with ``flags`` =
  :data:`engine.backends.llama_context.STATE_PARTIAL_ONLY` only the header and the recurrent part.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from engine.backends.base import ContextSettings
from engine.protocol import ModelFacts

StateBlob = bytes | bytearray | np.ndarray  # a sequence state as state_set reads it (a uint8 array in place)


class GrammarState(Protocol):
    """Where an answer held to a grammar is (:class:`engine.backends.llama_grammar.LlamaGrammar`): which
    tokens may come next, advanced one chosen token at a time (engine.decoding.constraint)."""

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        """Booleans: which of ``ids`` (distinct token ids) the grammar allows next."""
        ...

    def accept(self, token: int) -> None:
        """Advance by ``token``, which :meth:`allowed` allows (RuntimeError otherwise, state unchanged)."""
        ...

    def close(self) -> None: ...


class ModelBackend(Protocol):
    """A loaded model: its vocabulary, its chat template and what it is."""

    @property
    def path(self) -> Path: ...  # the model file (a chat template may print its name; snapshots hash it)

    # -- vocabulary ------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        """``add_special``: start with BOS if the model wants one; ``parse_special``: read control
        tokens' texts (``<|im_start|>``) as those tokens, else as plain text."""
        ...

    def piece(self, token: int) -> bytes: ...

    def token_text(self, token: int) -> str: ...

    def control_tokens(self) -> dict[str, int]:
        """Text → id of the tokens only ``parse_special`` reads from text."""
        ...

    def is_eog(self, token: int) -> bool: ...

    @property
    def adds_bos(self) -> bool: ...

    @property
    def bos(self) -> int: ...

    @property
    def eos(self) -> int: ...

    def chat_template(self) -> str | None:
        """The model's own Jinja chat template; None: it ships none (ChatML is used)."""
        ...

    def grammar(self, text: str, root: str) -> GrammarState:
        """A grammar (GBNF ``text`` starting at rule ``root``) over this vocabulary; raises
        :class:`engine.backends.llama_grammar.ConstraintRefused` (a ValueError) when it cannot be read."""
        ...

    # -- what it is ------------------------------------------------------------------------------

    def facts(self) -> ModelFacts: ...

    @property
    def batch_exact(self) -> bool: ...  # a batch of tokens computes as they would one by one (drafting needs it)

    @property
    def weight_type(self) -> str | None: ...  # named when drafting is refused for want of batch exactness

    @property
    def has_mtp(self) -> bool: ...  # a multi-token-prediction head was loaded with it

    def close(self) -> None: ...


class ContextBackend(Protocol):
    """One inference context over a model: decoding sequence 0, its logits, its state."""

    @property
    def settings(self) -> ContextSettings: ...  # as made (n_batch no longer than the context takes)

    @property
    def n_ctx(self) -> int: ...

    @property
    def n_rs_seq(self) -> int: ...  # recurrent rollback planes: how many tokens seq_rm can take back

    def decode(self, tokens: list[int] | np.ndarray, start_pos: int, *, all_logits: bool = False,
               seq_id: int = 0, abort: Callable[[], bool] | None = None, prune: bool = False,
               logits: bool = True, prompt: bool = False) -> None:
        """Decode 1..``settings.n_batch`` tokens at positions ``start_pos..``: logits for the last
        row, or for every row with ``all_logits``. ``prune``: past the last layer's attention only the
        output rows are computed (their logits stay readable; the state is the same); with
        ``logits=False`` too, none is (the state only: :meth:`logits` then refuses). ``prompt``: a
        prompt read, whose rows need not equal single-token decodes (any other batch's must)."""
        ...

    def logits(self, row: int = -1) -> np.ndarray:
        """Logits (``n_vocab`` floats) of an output row of the last decode, -1 the last."""
        ...

    def clear(self) -> None: ...

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        """Remove positions ``p0..p1`` (-1: to the end); False when the backend cannot (a recurrent
        state rolled back further than its planes reach)."""
        ...

    def rewind(self, seq_id: int, n_tokens: int, recurrent_blob: bytes | None) -> bool:
        """Hold the first ``n_tokens`` again: the recurrent part from ``recurrent_blob`` (a
        partial-only blob taken there; None without one), the attention cells after them removed."""
        ...

    def state_size(self, seq_id: int = 0, flags: int = 0) -> int: ...

    def state_get(self, seq_id: int = 0, flags: int = 0) -> bytes: ...

    def state_set(self, blob: StateBlob, seq_id: int = 0, flags: int = 0) -> bool:
        """Load a sequence state (replacing what the sequence held); False when it is refused."""
        ...

    def close(self) -> None: ...
