"""What Hearth says about a model's context, the same in the window and on the command line.

The engine chooses and grows contexts (engine.context.context_memory, engine.context.context_growth); this module
only words its reports: the model picker's state line, the line a grown context prints, and the
``context`` object of ``hearth info --json``.
"""

from __future__ import annotations

import msgspec

from engine import protocol as p
from model_store.download_errors import format_bytes


def context_state(report: p.ContextReport) -> str:
    """``"Reads up to 32,768 tokens at once · 1.2 GiB of memory"``, for the model picker: what the
    loaded model can read at once and the memory it takes, in words a person knows
    (:func:`context_terms` is the same in the technical terms)."""
    return f"Reads up to {report.n_ctx:,} tokens at once · {format_bytes(report.estimated_bytes)} of memory"


def context_terms(report: p.ContextReport, arch: str) -> str:
    """The picker's state line in technical terms, for its tooltip: ``"llama; context 32,768 tokens
    (auto: fits in 1.2 GiB)"``."""
    how = "auto" if report.mode == "auto" else "fixed"
    return f"{arch}; context {report.n_ctx:,} tokens ({how}: fits in {format_bytes(report.estimated_bytes)})"


def context_details(report: p.ContextReport) -> str:
    """Settings → Model: the chosen size, the memory it takes and the trained maximum."""
    kv = "8-bit" if report.kv_type == "q8_0" else "16-bit"
    return (f"{report.n_ctx:,} tokens ({'auto' if report.mode == 'auto' else 'fixed'}); the model takes about "
            f"{format_bytes(report.estimated_bytes)}, of which {format_bytes(report.kv_bytes)} is its {kv} attention "
            f"cache. Trained on up to {report.n_ctx_train:,} tokens; {report.max_n_ctx:,} fit in memory now.")


def grown_line(grown: p.ContextGrown) -> str:
    """The one line that says a context grew."""
    report = grown.context
    return (f"the context grew from {grown.previous_n_ctx:,} to {report.n_ctx:,} tokens to hold this "
            f"(the model now takes about {format_bytes(report.estimated_bytes)})")


def context_json(report: p.ContextReport | None) -> dict | None:
    """``hearth info --json``'s ``context``: n_ctx, n_ctx_train, mode, kv_bytes, estimated_bytes and more."""
    return None if report is None else msgspec.to_builtins(report)
