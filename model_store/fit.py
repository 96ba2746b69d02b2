"""Will a model fit in this machine's memory? Advice per quantization of a catalogue entry.

For each file of an entry, the memory a loaded model needs is estimated as::

    needed = file size                          (weights are memory-mapped and all touched)
           + recurrent state                    (fixed per sequence; hybrid models only)
           + KV bytes per token x context       (attention layers, f16 cache)
           + RUNTIME_OVERHEAD_BYTES             (compute buffers, tokenizer, the worker process)

and compared with the memory available now (``psutil.virtual_memory().available``, or a number
the caller passes, which is how tests pin it; :data:`AVAILABLE_MEMORY_ENV` pins it for a whole
process tree, the one way a test simulates a small machine). The verdict:

* ``"fits"``: needed is at most :data:`FITS_PERCENT` (70 %) of available, leaving room for
  the rest of the desktop and for the state snapshots of a long session;
* ``"tight"``: needed is at most all of available; it loads, but the system may swap;
* ``"too_big"``: needed exceeds available.

The recommended variant is the entry's ``recommended_quant`` when it fits, otherwise the
largest file that fits (more bits, better answers); when nothing fits, none is recommended.

This is advice, not a guarantee: the estimate leaves out drafting (a draft model, or the extra
recurrent-state copies a rollback-capable context keeps) and assumes nothing else starts.

The same arithmetic sizes contexts: :func:`longest_context` is the one rule for "the
longest context a memory budget holds", used for the catalogue's figures and by the worker's
automatic context (``engine.context.context_memory``), with the budget :func:`memory_budget` takes from what
is available.

A model never uses more context than it was trained on: :func:`usable_context` is the one
rule for the context a file can use here, what memory holds capped at the trained length, which is
what the worker's automatic context gets. Where memory would hold more, that is headroom, not
context: :class:`ContextHere` keeps both figures, and :func:`context_here` gives them for a catalogue
file and for a transformer of its size.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace

import psutil

from model_store.catalogue_schema import CatalogueEntry

# The worker process (Python, numpy, llama.cpp's code) before it loads a model, llama.cpp's CPU
# compute buffers as a 512-token batch touches them, and the vocabulary tables: 96-100 MiB beyond
# the file and the KV cache, measured as resident memory for SmolLM2 and hybrid-bench at 2k-32k
# tokens (tests/bench/bench_context.py; tests/process/test_context_memory.py checks it).
RUNTIME_OVERHEAD_BYTES = 100 << 20
FITS_PERCENT = 70
TIGHT_PERCENT = 100
ADVICE_CONTEXT = 8192  # the context a fit verdict assumes when none is given: a model holding this much is usable
DEFAULT_BUDGET_PERCENT = FITS_PERCENT  # the share of available memory an automatic context may fill
BUDGET_PERCENT_RANGE = (10, 95)
CONTEXT_STEP = 256  # llama.cpp sizes every context in multiples of this many tokens
LONGEST_CONTEXT = 1 << 24  # where the memory-only headroom figures stop counting
# Test-only: the available memory, in bytes, every Hearth process of the tree reports instead of
# measuring it (a small machine simulated on a big one).
AVAILABLE_MEMORY_ENV = "HEARTH_TEST_AVAILABLE_MEMORY"

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


def available_memory(held: int = 0) -> int:
    """Memory the system can give a new process now without swapping, in bytes. ``held``: what the
    calling process holds already (the measurement leaves it out; a pinned figure, which stands for
    the machine before Hearth loaded anything, has it taken out to match)."""
    pinned = os.environ.get(AVAILABLE_MEMORY_ENV, "").strip()
    if pinned.isdigit():
        return max(0, int(pinned) - held)
    return int(psutil.virtual_memory().available)


def memory_budget(available_bytes: int, percent: int = DEFAULT_BUDGET_PERCENT) -> int:
    """The bytes an automatic context may take in all (model, state, runtime): ``percent`` of available."""
    return available_bytes * percent // 100


def longest_context(total_bytes: Callable[[int], int], budget_bytes: int, cap: int) -> int:
    """The longest context, a multiple of :data:`CONTEXT_STEP` at most ``cap``, whose
    ``total_bytes(n_ctx)`` (growing with ``n_ctx``) is within ``budget_bytes``; 0 when none is."""
    low, high = 0, max(0, cap) // CONTEXT_STEP
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if total_bytes(middle * CONTEXT_STEP) <= budget_bytes else (low, middle - 1)
    return low * CONTEXT_STEP


def entry_total_bytes(entry: CatalogueEntry, file_bytes: int, transformer: bool = False) -> Callable[[int], int]:
    """``n_ctx -> bytes`` a catalogue model's file takes loaded; ``transformer``: the same for a
    transformer of equal size (every layer keeps K and V, no recurrent state)."""
    s = entry.state
    if transformer:
        per_token = entry.kv_bytes_per_token() * (s.attention_layers + s.recurrent_layers) // max(1, s.attention_layers)
        fixed = file_bytes + RUNTIME_OVERHEAD_BYTES
    else:
        per_token, fixed = entry.kv_bytes_per_token(), file_bytes + entry.recurrent_state_bytes() + RUNTIME_OVERHEAD_BYTES
    return lambda n_ctx: fixed + per_token * n_ctx


def usable_context(memory_tokens: int, trained_tokens: int) -> int:
    """The context a model can use: what memory holds (``memory_tokens``), never past the length it
    was trained on, rounded down to :data:`CONTEXT_STEP` as llama.cpp sizes contexts; the same as
    :func:`longest_context` capped at ``trained_tokens``, the worker's automatic context."""
    return max(0, min(memory_tokens, trained_tokens // CONTEXT_STEP * CONTEXT_STEP))


@dataclass(frozen=True)
class ContextHere:
    """The context one file can use on this machine, with the memory figure behind it."""

    memory_tokens: int  # the longest context the memory budget holds, memory alone deciding (headroom)
    trained_tokens: int  # the length the model was trained on

    @property
    def tokens(self) -> int:
        """The context it can use: :func:`usable_context`."""
        return usable_context(self.memory_tokens, self.trained_tokens)

    @property
    def has_headroom(self) -> bool:
        """Memory would hold more than the model can use: its trained length is the limit."""
        return self.memory_tokens > self.tokens


def headroom(entry: CatalogueEntry, file_bytes: int, available_bytes: int,
             percent: int = DEFAULT_BUDGET_PERCENT) -> tuple[int, int]:
    """(the context this file holds within the memory budget; the same for a transformer of equal
    size), memory alone deciding (up to :data:`LONGEST_CONTEXT`), so they compare. Not a context the
    model can use: that is capped at its trained length (:func:`context_here`)."""
    budget = memory_budget(available_bytes, percent)
    return (longest_context(entry_total_bytes(entry, file_bytes), budget, LONGEST_CONTEXT),
            longest_context(entry_total_bytes(entry, file_bytes, transformer=True), budget, LONGEST_CONTEXT))


def context_here(entry: CatalogueEntry, file_bytes: int, available_bytes: int,
                 percent: int = DEFAULT_BUDGET_PERCENT) -> tuple[ContextHere, ContextHere]:
    """(this file's context here; a transformer of equal size's, trained as long): each the memory
    figure of :func:`headroom` with the entry's trained length, which caps what it can use."""
    hybrid, transformer = headroom(entry, file_bytes, available_bytes, percent)
    return ContextHere(hybrid, entry.context_length), ContextHere(transformer, entry.context_length)


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
