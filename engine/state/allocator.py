"""The C allocator's thresholds in the worker, which moves tens of MB of model state each turn.

A turn copies a hybrid model's recurrent state out of llama.cpp and back (the question's
checkpoint, the rewind onto the last question's snapshot, the turn end's capture): 20 MB at the
Qwen3.5-0.8B shape, more for larger models. glibc serves such a block with ``mmap`` and returns it
to the system when it is freed (or trims it off the heap's top), so every copy lands on fresh pages
and pays a page fault per 4 KiB, which cost several times the copy itself (docs/performance.md,
"Measurements behind the design"; ``tests/unit/test_allocator.py`` shows the blocks kept). Keeping blocks up to
``MMAP_THRESHOLD_BYTES`` on the heap, and up to ``TRIM_THRESHOLD_BYTES`` of freed heap for the next
turn, makes those copies cost what they should; larger states behave as before.

Linux with glibc only (``mallopt``); elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 << 20
TRIM_THRESHOLD_BYTES = 64 << 20


def keep_freed_state_memory() -> bool:
    """Set the thresholds in this process; True when glibc took them."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has mallopt, others may not)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
