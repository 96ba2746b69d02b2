"""What a worker's death means, in words a user can act on.

A worker that dies of SIGILL, SIGSEGV, SIGBUS, SIGFPE or SIGABRT crashed inside native code (almost
always llama.cpp); the message names the signal in words and the CPU build that was in use, since
an instruction the CPU does not really run (SIGILL) is the one crash a different build fixes.
"""

from __future__ import annotations

import signal

import msgspec

# Signals that mean a crash inside native code (not a kill from outside), in words a user reads.
CRASH_WORDS = {"SIGILL": "illegal instruction", "SIGSEGV": "invalid memory access", "SIGBUS": "bus error",
               "SIGFPE": "arithmetic fault", "SIGABRT": "aborted"}


class EngineDead(msgspec.Struct):
    """The worker is gone. Reported once per worker; restart the client to go on."""

    exit_code: int | None
    message: str
    signal: str = ""  # "SIGILL", ... when a signal ended it
    cpu_variant: str = ""  # the CPU build of llama.cpp it was running

    @property
    def crashed(self) -> bool:
        """It died inside native code (not killed from outside, not a clean exit)."""
        return self.signal in CRASH_WORDS


# Windows ends a process that crashes in native code with an exception code as its exit status
# (positive: 0xC000001D is 3221225501), where POSIX kills it with a signal. The signal each stands for.
WINDOWS_CRASHES = {0xC000001D: "SIGILL", 0xC0000005: "SIGSEGV", 0xC00000FD: "SIGSEGV", 0xC0000094: "SIGFPE",
                   0xC0000409: "SIGABRT"}


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def death_signal(code: int) -> str | None:
    """The signal an exit status stands for: a negative status on POSIX, a crash code on Windows."""
    if code < 0:
        return signal_name(-code)
    return WINDOWS_CRASHES.get(code)


def engine_dead(code: int | None, cpu_variant: str = "") -> EngineDead:
    """The event for a worker that ended with ``code`` (a negative code is the signal that killed it)."""
    if code is None:
        return EngineDead(exit_code=None, message="the engine stopped answering")
    name = death_signal(code)
    if name is None:
        return EngineDead(exit_code=code, message=f"the engine exited with status {code}")
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
