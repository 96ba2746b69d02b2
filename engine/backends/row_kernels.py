"""Which kernels a short batch takes: row by row (exact) for a verify batch, the fast ones for a prompt read.

ggml's CPU backend multiplies a batch of several rows with other kernels than a single token
(llamafile's sgemm, the tiled K-quant GEMM), which round differently. A speculative verify batch
(at most :data:`~engine.protocol.MAX_DRAFT` + 1 rows) must give each row exactly what decoding that
token alone gives, so Hearth's build sends a batch of fewer than ``EXACT_ROWS`` rows down the
single-row kernels (``installers/llama_build.py``). A prompt read has no such need: plain and
drafted answers read a prompt the same way. A short prompt read is slower on the single-row kernels
than on the batched ones (docs/performance.md, "Measurements behind the design"), so the bound is a variable the
build exports from each CPU backend library (``hearth_exact_rows``), and the engine lowers it to 0
around a prompt read (:meth:`engine.models.session.ModelSession.feed`) and nowhere else.

A library without the variable (an older build, or a CPU backend given by ``HEARTH_CPU_LIBRARY``)
keeps every short batch exact, as before: :func:`short_reads_exact` says which holds, and the
pruning rule of :func:`engine.decoding.generation.prefill` follows it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.protocol.limits import EXACT_ROWS

SWITCH = "hearth_exact_rows"  # installers/llama_build.py ROW_SWITCH
_switch: ctypes.c_int | None = None


def bind(library: Path) -> bool:
    """Find the switch in the CPU backend library just loaded; False when it has none."""
    global _switch
    try:
        _switch = ctypes.c_int.in_dll(ctypes.CDLL(str(library)), SWITCH)
    except (OSError, ValueError):
        _switch = None
    return _switch is not None


def short_reads_exact() -> bool:
    """Whether a prompt read shorter than ``EXACT_ROWS`` rows still takes the single-row kernels."""
    return _switch is None


@contextmanager
def fast_kernels() -> Iterator[None]:
    """Around a prompt read's decode: a batch of any size may take the batched kernels."""
    if _switch is None:
        yield
        return
    _switch.value = 0
    try:
        yield
    finally:
        _switch.value = EXACT_ROWS
