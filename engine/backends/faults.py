"""Test-only: native crashes on demand, for the paths this machine's CPU never takes.

``HEARTH_TEST_CPU_FAULT="STAGE:VARIANT:SIGNAL[,...]"`` makes the process kill itself with SIGNAL
(SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT; or SIGKILL, SIGTERM: a kill from outside, not a crash)
when it reaches STAGE with the CPU build VARIANT (``*``: any build). Stages: ``canary`` (the canary
child, after loading the build), ``load`` (loading a model) and ``decode`` (the first decode of a
request in the process; the load's warm-up decode is part of ``load``). The process dies by the signal itself, as it would from a real trap, so everything after
it (exit status, messages, fallback, caching) is the real code path. Unset, this costs one
dictionary lookup per stage.

``HEARTH_TEST_DECODE_PACE_MS=N`` pauses N ms after each streamed decode step, so a test can act
while an answer is still being written however fast this machine decodes its tiny model.

``HEARTH_TEST_INTERNAL_ERROR="KIND[,...]"`` makes the worker's loop raise when it takes a request of
one of these kinds (``read_document``, ``chat``, ...): the bug no input can cause on purpose, so a test
can see each request still end (engine.protocol.request_lifecycle).
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "HEARTH_TEST_CPU_FAULT"
STAGES = ("canary", "load", "decode")
PACE_ENV = "HEARTH_TEST_DECODE_PACE_MS"  # read once per request (engine.requests.core)
INTERNAL_ERROR_ENV = "HEARTH_TEST_INTERNAL_ERROR"


class InjectedError(RuntimeError):
    """The internal error the test switch asked for."""


def raise_if_injected(kind: str) -> None:
    """Raise :class:`InjectedError` if the switch names this kind of request."""
    kinds = os.environ.get(INTERNAL_ERROR_ENV, "")
    if kinds and kind in (item.strip() for item in kinds.split(",")):
        raise InjectedError(f"injected for {kind} ({INTERNAL_ERROR_ENV})")


def injected_signal(stage: str, variant: str) -> signal.Signals | None:
    """The signal the switch asks for at ``stage`` with ``variant``, if any."""
    for item in os.environ.get(FAULT_ENV, "").split(","):
        parts = item.strip().split(":")
        if len(parts) != 3 or parts[0] != stage or parts[1] not in (variant, "*"):
            continue
        name = parts[2].upper()
        try:
            return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
        except KeyError:
            raise ValueError(f"{FAULT_ENV}: unknown signal {parts[2]!r}") from None
    return None


def only_stage(stage: str, value: str) -> str:
    """The switch's value with only ``stage``'s entries (a canary child must not die at "decode")."""
    return ",".join(item for item in value.split(",") if item.strip().startswith(stage + ":"))


def crash_if_injected(stage: str, variant: str) -> None:
    """Die by the injected signal, with its default action (as a CPU trap would)."""
    signum = injected_signal(stage, variant)
    if signum is None:
        return
    if signum not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be handled (nor reset)
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pause()  # the signal is delivered before this returns
