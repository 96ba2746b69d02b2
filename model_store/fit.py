"""Will a model fit in this machine's memory? Advice per quantization of a catalogue entry.

For each file of an entry, the memory a loaded model needs is estimated as::

    needed = file size                          (weights are memory-mapped and all touched)
           + recurrent state                    (fixed per sequence; hybrid models only)
           + KV bytes per token x context       (attention layers, f16 cache)
           + RUNTIME_OVERHEAD_BYTES             (compute buffers, tokenizer, the worker process)

and compared with the memory available now (``psutil.virtual_memory().available``, or a number
the caller passes, which is how tests pin it). The verdict:

* ``"fits"``: needed is at most :data:`FITS_PERCENT` (70 %) of available, leaving room for
  the rest of the desktop and for the state snapshots of a long session;
* ``"tight"``: needed is at most all of available; it loads, but the system may swap;
* ``"too_big"``: needed exceeds available.

The recommended variant is the entry's ``recommended_quant`` when it fits, otherwise the
largest file that fits (more bits, better answers); when nothing fits, none is recommended.

This is advice, not a guarantee: the estimate leaves out drafting (a draft model, or the extra
recurrent-state copies a rollback-capable context keeps) and assumes nothing else starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import psutil

from model_store.catalogue_schema import CatalogueEntry

# llama.cpp's CPU compute buffers for a small batch, the tokenizer and vocabulary tables and the
# worker's Python runtime: a few hundred MiB for the models in the catalogue.
RUNTIME_OVERHEAD_BYTES = 256 << 20
FITS_PERCENT = 70
TIGHT_PERCENT = 100

FITS, TIGHT, TOO_BIG = "fits", "tight", "too_big"


@dataclass(frozen=True)
class VariantFit:
    """The memory estimate and verdict for one quantization at one context length."""

    quant: str
    file_bytes: int
    state_bytes: int
    needed_bytes: int
    available_bytes: int
    verdict: str  # "fits" | "tight" | "too_big"
    recommended: bool


def state_bytes(entry: CatalogueEntry, context_tokens: int) -> int:
    """The memory one sequence's state takes with ``context_tokens`` of context.

    Raises:
        ValueError: If ``context_tokens`` is not positive or exceeds the model's context.
    """
    if context_tokens <= 0:
        raise ValueError(f"context must be at least 1 token, not {context_tokens}")
    if context_tokens > entry.context_length:
        raise ValueError(
            f"context {context_tokens} exceeds {entry.id}'s trained context of "
            f"{entry.context_length} tokens"
        )
    return entry.recurrent_state_bytes() + entry.kv_bytes_per_token() * context_tokens


def verdict(needed_bytes: int, available_bytes: int) -> str:
    """``"fits"``, ``"tight"`` or ``"too_big"`` for a need against what is available."""
    if needed_bytes * 100 <= available_bytes * FITS_PERCENT:
        return FITS
    if needed_bytes * 100 <= available_bytes * TIGHT_PERCENT:
        return TIGHT
    return TOO_BIG


def available_memory() -> int:
    """Memory the system can give a new process now without swapping, in bytes."""
    return int(psutil.virtual_memory().available)


def advise(
    entry: CatalogueEntry, context_tokens: int, available_bytes: int | None = None
) -> list[VariantFit]:
    """Estimate each of ``entry``'s files at ``context_tokens`` against available memory.

    Args:
        entry: The catalogue entry.
        context_tokens: The context length the model would be loaded with.
        available_bytes: Memory to compare with; None measures it (psutil).

    Returns:
        One :class:`VariantFit` per file, in catalogue order; at most one is recommended.

    Raises:
        ValueError: If ``context_tokens`` is not positive or exceeds the model's context.
    """
    available = available_memory() if available_bytes is None else int(available_bytes)
    state = state_bytes(entry, context_tokens)
    fits = []
    for f in entry.files:
        needed = f.size_bytes + state + RUNTIME_OVERHEAD_BYTES
        fits.append(VariantFit(f.quant, f.size_bytes, state, needed, available,
                               verdict(needed, available), recommended=False))
    pick = _recommended_quant(entry, fits)
    return [replace(v, recommended=True) if v.quant == pick else v for v in fits]


def _recommended_quant(entry: CatalogueEntry, fits: list[VariantFit]) -> str | None:
    fitting = [v for v in fits if v.verdict == FITS]
    for v in fitting:
        if v.quant.upper() == entry.recommended_quant.upper():
            return v.quant
    if not fitting:
        return None
    return max(fitting, key=lambda v: v.file_bytes).quant
