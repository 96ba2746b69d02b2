"""The worker's allocator keeps freed state-sized blocks for the next turn (engine.state.allocator)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Three 20 MB blocks, as a turn copies a Qwen3.5-0.8B state: one freed, then two at once. Prints the
# free bytes the heap kept afterwards (glibc's mallinfo2).
SCRIPT = """
import ctypes, sys
from engine.state.allocator import keep_freed_state_memory
if sys.argv[1] == "tuned":
    assert keep_freed_state_memory()
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
size = 20 << 20
libc.free(libc.malloc(size))
blocks = [libc.malloc(size), libc.malloc(size)]
for block in blocks:
    libc.free(block)
print(libc.mallinfo2().fordblks)
"""


def kept_after_a_turn(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt and mallinfo2")
def test_freed_state_sized_blocks_stay_on_the_heap_for_the_next_copy():
    """Without the thresholds glibc gives the two blocks back to the system, and the next copy of a
    state faults in fresh pages (25-40 ms for 20 MB); with them the heap keeps them."""
    assert kept_after_a_turn("tuned") >= 40 << 20
    assert kept_after_a_turn("plain") < 20 << 20
