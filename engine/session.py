"""A loaded model with one live context, and the tokens that context holds (sequence 0)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.backends.base import ContextSettings, ModelFacts, ModelLoadError, default_threads
from engine.backends.llama_cpp import LlamaContext, LlamaModel
from engine.context_memory import CONTEXT_STEP, check_context_fits
from engine.model_files import check_model_file, resolve_model_ref
from engine.prompts import check_chat_template
from engine.protocol import DEFAULT_CONTEXT
from model_store.gguf_meta import Value



class ModelSession:
    """Owns a model and its context; feeds tokens and hands out the logits of the last one."""

    def __init__(self, model: LlamaModel, settings: ContextSettings, facts: ModelFacts | None = None) -> None:
        self.model = model
        self.context = LlamaContext(model, settings)
        self.tokens: list[int] = []
        self._facts = facts

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

    def feed(self, tokens: list[int]) -> None:
        """Decode ``tokens`` after those already in the context; logits are kept for the last one."""
        for begin in range(0, len(tokens), self.n_batch):
            chunk = tokens[begin : begin + self.n_batch]
            self.context.decode(chunk, self.n_past)
            self.tokens.extend(chunk)

    def last_logits(self) -> np.ndarray:
        return self.context.logits(-1)

    def close(self) -> None:
        self.context.close()
        self.model.close()


def open_session(
    ref: str,
    *,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    on_progress: Callable[[float], None] | None = None,
    draft_max: int = 0,
) -> ModelSession:
    """Resolve ``ref`` (``default`` or a path), check the file and that the context fits in memory,
    load it and create its context."""
    path = resolve_model_ref(ref)
    metadata = check_model_file(path)
    n_ctx = context_length(n_ctx, metadata)
    check_context_fits(path, metadata, n_ctx)  # at once, not after llama.cpp has tried for a minute
    model = LlamaModel(path, load_mtp=True, on_progress=on_progress)  # an MTP head, if any, can draft
    try:
        check_chat_template(model)
    except ModelLoadError:
        model.close()
        raise
    threads = n_threads or default_threads()
    facts = model.facts()
    # Hybrid models roll rejected draft tokens back through recurrent snapshot planes (n_rs_seq).
    rollback = draft_max if (facts.is_recurrent or facts.is_hybrid) and facts.supports_rollback else 0
    settings = ContextSettings(n_ctx=n_ctx, n_threads=threads, n_rs_seq=rollback)
    try:
        return ModelSession(model, settings, facts)
    except Exception:
        model.close()
        raise


def context_length(requested: int | None, metadata: dict[str, Value]) -> int:
    """The context to create: the length asked for, else the model's trained context capped by
    DEFAULT_CONTEXT; never shorter than llama.cpp makes one (:data:`CONTEXT_STEP` tokens), so its
    batches (no longer than the context asked for) always hold a draft and its rollback planes."""
    if not requested:
        trained = metadata.get(f"{metadata.get('general.architecture')}.context_length")
        requested = min(trained, DEFAULT_CONTEXT) if isinstance(trained, int) and trained > 0 else DEFAULT_CONTEXT
    return max(requested, CONTEXT_STEP)
