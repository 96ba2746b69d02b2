"""What a worker's death means, in words a user can act on.

A worker that dies of SIGILL, SIGSEGV, SIGBUS, SIGFPE or SIGABRT crashed inside native code (almost
always llama.cpp); the message names the signal in words and the CPU build that was in use, since
an instruction the CPU does not really run (SIGILL) is the one crash a different build fixes.
"""

from __future__ import annotations

import signal

from engine.client import CRASH_WORDS, EngineDead


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def engine_dead(code: int | None, cpu_variant: str = "") -> EngineDead:
    """The event for a worker that ended with ``code`` (a negative code is the signal that killed it)."""
    if code is None:
        return EngineDead(exit_code=None, message="the engine stopped answering")
    if code >= 0:
        return EngineDead(exit_code=code, message=f"the engine exited with status {code}")
    name = signal_name(-code)
    if name in CRASH_WORDS:
        build = f" with the CPU build {cpu_variant}" if cpu_variant else ""
        message = f"the inference library crashed ({CRASH_WORDS[name]}, {name}){build}"
    elif name == "SIGKILL":
        message = "the engine was killed (SIGKILL: out of memory, or stopped by another program)"
    else:
        message = f"the engine was stopped by {name}"
    return EngineDead(exit_code=code, message=message, signal=name, cpu_variant=cpu_variant)


def describe_exit(code: int | None) -> str:
    return engine_dead(code).message
