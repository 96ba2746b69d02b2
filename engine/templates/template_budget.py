"""What a model's chat template may cost: time, output size, and the values it builds on the way.

A chat template is a program that comes inside a downloaded file. Jinja2's immutable sandbox keeps
it away from Python objects and files; this module keeps it from taking the worker's time and
memory. A render gets a :class:`Budget` and, while it runs (:func:`budget_in_force`), a ledger:

* **built**: every value an operator, filter or method builds (``~``, ``+``, ``*``, ``%``, ``join``,
  ``replace``, ``sum``, ``list``, ``indent``, ``center``, ``format`` …) is counted against one
  allowance, :attr:`Budget.build_units`: a string's characters, a list's items at
  :data:`ITEM_UNITS` each. The cost is estimated *before* the value is built
  (:mod:`engine.templates.template_sizes`), so no single operation can allocate a gigabyte and be refused
  afterwards, and many budget-sized values kept in a list add up and are refused too;
* **time**: a deadline, checked by every budgeted operation and, through a line tracer, by every
  loop (a loop that prints nothing);
* **output**: collected piece by piece and stopped when it outgrows :attr:`Budget.max_chars`.

Over budget raises :class:`TemplateBudgetError`, which the caller turns into the one-line refusal.
The sandbox that calls into this ledger is :mod:`engine.templates.template_sandbox`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BASE_SECONDS = 2.0  # rendering time any conversation may take
SECONDS_PER_MB = 1.0  # and per MB of message text
BASE_CHARS = 1 << 20  # characters the output may have beyond what the messages bring
CHARS_PER_MESSAGE_CHAR = 4  # a template may repeat the messages a few times (tools, reasoning)
BUILD_BEYOND_OUTPUT = 4 << 20  # what a render may build, beyond BUILD_PER_OUTPUT_CHAR times its output limit
BUILD_PER_OUTPUT_CHAR = 4  # (a template builds its pieces with ~ and + before printing them)
ITEM_UNITS = 16  # a list item costs like this many characters (a pointer, often a new small object)
MAX_INT_ARGUMENT = 100_000  # the largest width or count a call may ask for (Jinja's range cap)
MAX_POWER_BITS = 4096  # the largest integer ** or * may produce, in bits
MAX_COMPARED_CHARS = 1 << 33  # characters one comparison or sort may compare (C code: no deadline stops it)


class TemplateBudgetError(Exception):
    """The template went over its budget; the message says which limit."""


@dataclass(frozen=True)
class Budget:
    max_chars: int  # characters of output
    seconds: float  # time for the whole render
    build_units: int  # characters (and items, at ITEM_UNITS) every operation together may build

    @classmethod
    def for_messages(cls, message_chars: int) -> Budget:
        max_chars = BASE_CHARS + CHARS_PER_MESSAGE_CHAR * message_chars
        return cls(max_chars=max_chars, seconds=BASE_SECONDS + SECONDS_PER_MB * message_chars / 1e6,
                   build_units=BUILD_BEYOND_OUTPUT + BUILD_PER_OUTPUT_CHAR * max_chars)


@dataclass
class _Ledger:
    budget: Budget
    deadline: float
    built: int = 0


_active = threading.local()
_UNLIMITED = Budget.for_messages(0)


def _ledger() -> _Ledger:
    ledger = getattr(_active, "ledger", None)
    if ledger is None:  # outside a render (Jinja folding constants at compile time): a fresh small budget
        ledger = _Ledger(_UNLIMITED, time.monotonic() + _UNLIMITED.seconds)
    return ledger


def max_chars() -> int:
    """The output limit of the render in progress."""
    return _ledger().budget.max_chars


def allowance_left() -> int:
    """What the render in progress may still build."""
    ledger = _ledger()
    return max(ledger.budget.build_units - ledger.built, 0)


def check_deadline() -> None:
    ledger = _ledger()
    if time.monotonic() > ledger.deadline:
        raise TemplateBudgetError(f"rendering took longer than {ledger.budget.seconds:.0f} s")


def afford(units: int, what: str) -> None:
    """Refuse, before it is built, a value of ``units`` that the render's allowance cannot pay for."""
    check_deadline()
    ledger = _ledger()
    if ledger.built + units > ledger.budget.build_units:
        raise TemplateBudgetError(f"{what} would build {units:,} characters after {ledger.built:,} built before; "
                                  f"a render may build {ledger.budget.build_units:,}")


def check_comparison(chars: int, what: str) -> None:
    """Refuse a comparison, search or sort that would compare more than :data:`MAX_COMPARED_CHARS`."""
    check_deadline()
    if chars > MAX_COMPARED_CHARS:
        raise TemplateBudgetError(f"{what} would compare {chars:,} characters (the limit is {MAX_COMPARED_CHARS:,})")


def spend(units: int) -> None:
    """Count ``units`` just built against the allowance (refused when it is exhausted)."""
    ledger = _ledger()
    ledger.built += units
    if ledger.built > ledger.budget.build_units:
        raise TemplateBudgetError(f"it built more than the {ledger.budget.build_units:,} characters a render may build")


def check_int_arguments(args: tuple, kwargs: dict, what: str) -> None:
    """Refuse a width or count larger than :data:`MAX_INT_ARGUMENT`."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT_ARGUMENT:
            raise TemplateBudgetError(f"{what} was asked for {value:,} (the limit is {MAX_INT_ARGUMENT:,})")


@contextmanager
def budget_in_force(budget: Budget) -> Iterator[None]:
    """Hold everything rendered on this thread inside the ``with`` to ``budget``, deadline included."""
    ledger = _Ledger(budget, time.monotonic() + budget.seconds)

    def trace(frame: Any, event: str, arg: Any) -> Callable:
        if time.monotonic() > ledger.deadline:
            raise TemplateBudgetError(f"rendering took longer than {budget.seconds:.0f} s")
        return trace

    previous_ledger, previous_trace = getattr(_active, "ledger", None), sys.gettrace()
    _active.ledger = ledger
    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous_trace)
        _active.ledger = previous_ledger


def collect_output(pieces: Iterator[str], budget: Budget) -> str:
    """Join a template's output pieces, stopping as soon as they outgrow the budget."""
    out: list[str] = []
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > budget.max_chars:
            raise TemplateBudgetError(f"its output grew past {budget.max_chars:,} characters")
        out.append(piece)
    return "".join(out)
