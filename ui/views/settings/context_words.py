"""Settings → Model's context, in words for someone who never heard of a KV cache:
how much the model can read at once and the memory that takes, with the technical terms in a tooltip."""

from __future__ import annotations

from engine.protocol import ContextReport
from model_store.download_errors import format_bytes

WORDS_PER_TOKEN = 0.75  # English text: about three words for every four tokens


def context_words(report: ContextReport) -> str:
    """What the loaded model can read at once and what that costs, in plain words."""
    how = "chosen automatically to fit this computer's memory" if report.mode == "auto" else "as you set it"
    return (f"{report.n_ctx:,} tokens (roughly {_words(report.n_ctx)} words) at once, {how}. The model uses about "
            f"{format_bytes(report.estimated_bytes)} of memory, {format_bytes(report.kv_bytes)} of it to hold what "
            f"it is reading. It was made to read up to {report.n_ctx_train:,} tokens; this computer has room for "
            f"{report.max_n_ctx:,}.")


def context_terms(report: ContextReport) -> str:
    """The same in the technical terms, for the tooltip."""
    kv = "8-bit (q8_0)" if report.kv_type == "q8_0" else "16-bit (f16)"
    return (f"Context window (n_ctx): {report.n_ctx:,} tokens, {report.mode}. KV cache: {kv}, "
            f"{format_bytes(report.kv_bytes)}; estimated total {format_bytes(report.estimated_bytes)}. Trained "
            f"context (n_ctx_train): {report.n_ctx_train:,}; the longest the memory budget holds: {report.max_n_ctx:,}.")


def _words(tokens: int) -> str:
    words = tokens * WORDS_PER_TOKEN
    step = 100 if words < 10_000 else 1000
    return f"{int(round(words / step) * step):,}"
