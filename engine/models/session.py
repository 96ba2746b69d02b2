"""A loaded model with one live context, and the tokens that context holds (sequence 0)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import msgspec
import numpy as np

from engine.backends.backend import ContextBackend, ModelBackend
from engine.backends.base import ContextSettings, ModelLoadError, default_threads
from engine.protocol import ModelFacts
from engine.backends.llama_context import DecodeAborted, LlamaContext
from engine.backends.llama_cpp import LlamaModel
from engine.context.context_memory import ContextPlan, ModelMemory, model_memory, plan_context
from engine.models.model_files import check_model_file, resolve_model_ref
from engine.templates.prompts import check_chat_template
from engine.templates.tool_formats import tool_format
from engine.decoding.sequence_penalty import Breakers
from engine.decoding.thread_budget import ThreadBudget
from model_store.fit import DEFAULT_BUDGET_PERCENT


# The last rows of a prompt read computed to the end while a drafting head follows the decodes
# (every row's hidden state, the last row's logits): what the head catches up on
# (engine.speculative.head_drafter). Chunks wholly before them are pruned (ModelSession.feed), and
# with no head following, all but a read's last chunk (engine.decoding.generation.prefill).
FULL_ROWS_TAIL = 512


class ModelSession:
    """Owns a model and its context; feeds tokens and hands out the logits of the last one."""

    def __init__(self, model: ModelBackend, settings: ContextSettings, facts: ModelFacts | None = None,
                 context: ContextBackend | None = None) -> None:
        """``context``: one already made over ``model`` (a test's fake backend); None: llama.cpp's, made
        with ``settings`` (``model`` is then a :class:`LlamaModel`)."""
        self.model = model
        self.context = context if context is not None else LlamaContext(cast(LlamaModel, model), settings)
        self.tokens: list[int] = []
        self.resets = 0  # how often the context was cleared: a state held since then is gone
        self._facts = facts
        # How the context was sized (open_session sets them; a session made directly has none).
        self.memory: ModelMemory | None = None
        self.plan: ContextPlan | None = None
        self.memory_percent = DEFAULT_BUDGET_PERCENT
        self.display_name = ""  # what the app calls the model (p.LoadModel.name); "" : the file's own name
        self.thread_budget: ThreadBudget | None = None  # set when the thread count was not asked for
        self.breakers = Breakers(model.piece)  # which tokens end a run for the sequence penalty
        self._constraint_masks: tuple[np.ndarray, np.ndarray] | None = None

    def constraint_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """Over the vocabulary: the tokens an answer held to a grammar never takes (control tokens, whose
        text Hearth never writes, but the end of generation), and the end-of-generation tokens
        (engine.decoding.constraint). Found once per model."""
        if self._constraint_masks is None:
            model = self.model
            control = set(model.control_tokens().values())
            eog_ids = [t for t in control | {model.eos} if 0 <= t < self.facts.n_vocab and model.is_eog(t)]
            banned = np.zeros(self.facts.n_vocab, dtype=bool)
            banned[list(control)] = True
            eog = np.zeros(self.facts.n_vocab, dtype=bool)
            eog[eog_ids] = True
            self._constraint_masks = banned & ~eog, eog
        return self._constraint_masks

    @property
    def name(self) -> str:
        """The model's name in what the worker says to the user: the app's name for it, else the file's."""
        return self.display_name or self.facts.name

    @property
    def facts(self) -> ModelFacts:
        if self._facts is None:
            self._facts = self.model.facts()
        return self._facts

    @property
    def n_ctx(self) -> int:
        return self.context.n_ctx

    @property
    def n_batch(self) -> int:
        return self.context.settings.n_batch

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        self.context.clear()
        self.tokens.clear()
        self.resets += 1

    def warm_up(self) -> None:
        """Run two tokens through the model and forget them (LlamaContext.warm_up); the session still
        holds nothing. A context without the step (the tests' fake) is left as it is."""
        warm_up = getattr(self.context, "warm_up", None)
        if warm_up is not None and self.n_past == 0:
            bos, eos = self.model.bos, self.model.eos
            warm_up([t if t >= 0 else 0 for t in (bos, eos)])

    def rewind(self, n_tokens: int, recurrent_blob: bytes | None) -> bool:
        """Go back to the first ``n_tokens`` of the live sequence (see LlamaContext.rewind); False
        when llama.cpp refused, and then the context must be reset before it is used again."""
        if not 0 < n_tokens <= self.n_past or not self.context.rewind(0, n_tokens, recurrent_blob):
            return False
        del self.tokens[n_tokens:]
        return True

    @property
    def has_recurrent_state(self) -> bool:
        return self.facts.has_recurrent_state

    def feed(self, tokens: list[int], *, abort: Callable[[], bool] | None = None, prune: bool = False,
             logits: bool = True) -> None:
        """Decode ``tokens`` after those already in the context; logits are kept for the last one.
        A prompt read: short batches may take the batched kernels (:mod:`engine.backends.row_kernels`);
        a verify batch decodes through the context itself.

        ``abort`` is polled while each batch is computed; when it turns true the batch stops and
        :class:`~engine.backends.llama_context.DecodeAborted` is raised, with the aborted batch counted
        nowhere (see :meth:`_drop_unfinished`). ``prune``: only the state and the last row's logits
        are wanted, not the other rows (:meth:`~engine.backends.llama_context.LlamaContext.decode`);
        with ``logits=False`` too, the state alone.
        """
        for begin in range(0, len(tokens), self.n_batch):
            chunk = tokens[begin : begin + self.n_batch]
            try:
                self.context.decode(chunk, self.n_past, abort=abort, prune=prune, logits=logits, prompt=True)
            except DecodeAborted:
                self._drop_unfinished()
                raise
            self.tokens.extend(chunk)

    def _drop_unfinished(self) -> None:
        """Make the context hold exactly ``tokens`` again after an aborted decode.

        The attention KV of the aborted batch is removed (llama.cpp removes only its unfinished
        micro-batch). A recurrent state cannot be trimmed: the abort may have come after some layers
        wrote their new state and before others did, so the whole sequence is cleared and the
        session holds nothing. Either way nothing reads on from the live state after a cancelled
        read (engine.state.snapshot_cursor forgets it); this keeps ``n_past`` true to what the context holds.
        """
        if self.has_recurrent_state:
            self.reset()
        else:
            self.context.seq_rm(0, self.n_past, -1)

    @property
    def rows_followed(self) -> bool:
        """Whether a drafting head reads every decode's rows (it attaches as ``after_decode``)."""
        return getattr(self.context, "after_decode", None) is not None

    def last_logits(self) -> np.ndarray:
        return self.context.logits(-1)

    def close(self) -> None:
        if self.thread_budget is not None:
            self.thread_budget.close()
        self.context.close()
        self.model.close()


def open_session(
    ref: str,
    *,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    on_progress: Callable[[float], None] | None = None,
    draft_max: int = 0,
    draft_width: int = 1,
    kv_type: str = "f16",
    memory_percent: int = DEFAULT_BUDGET_PERCENT,
    available: int | None = None,
) -> ModelSession:
    """Resolve ``ref`` (``default`` or a path), check the file, choose the context (``n_ctx``
    tokens, or None for the longest ``memory_percent`` % of the ``available`` memory holds: see
    engine.context.context_memory), load it and create the context. A context that cannot fit is refused
    here, from the file's metadata, not after llama.cpp has tried for a minute."""
    path = resolve_model_ref(ref)
    metadata = check_model_file(path)
    memory = model_memory(path, metadata)
    # A tree of width W verifies each path on its own sequence (plus one that holds parked cells):
    # each has its own recurrent state, with its rollback planes; the attention cache is shared.
    sequences = draft_width + 1 if draft_width > 1 else 1
    planes = (1 + draft_max) * sequences if memory.recurrent_bytes else 1
    plan = plan_context(path, memory, n_ctx, kv_type=kv_type, planes=planes, percent=memory_percent,
                        available=available)
    model = LlamaModel(path, load_mtp=True, on_progress=on_progress)  # an MTP head, if any, can draft
    try:
        thinks, thinking_switch = check_chat_template(model)
    except ModelLoadError:
        model.close()
        raise
    threads = n_threads or default_threads()
    form = tool_format(model.chat_template())
    facts = msgspec.structs.replace(model.facts(), thinks=thinks, thinking_switch=thinking_switch,
                                    tool_form=form.name if form is not None else "")
    # Hybrid models roll rejected draft tokens back through recurrent snapshot planes (n_rs_seq).
    rollback = draft_max if facts.has_recurrent_state and facts.supports_rollback else 0
    settings = ContextSettings(n_ctx=plan.n_ctx, n_threads=threads, n_rs_seq=rollback, kv_type=kv_type,
                               n_seq_max=sequences, kv_unified=sequences > 1)
    try:
        session = ModelSession(model, settings, facts)
    except Exception:
        model.close()
        raise
    session.memory, session.plan, session.memory_percent = memory, plan, memory_percent
    if not n_threads:  # the count was not asked for: leave the cores other programs keep busy to them
        session.thread_budget = session.context.thread_budget = ThreadBudget(threads)
    return session
