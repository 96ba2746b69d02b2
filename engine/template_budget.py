"""What a model's chat template may cost: time, text size, and the size of every value it builds.

A chat template is a program that comes inside a downloaded file. Jinja2's immutable sandbox keeps
it away from Python objects and files; this module keeps it from taking the worker's time and
memory (``{{ strftime_now('%Y' * 10000000) }}`` took a minute and 4 GB before failing, and
aborted the process under a memory limit). A render gets a :class:`Budget`:

* every ``*``, ``**``, ``+`` and ``%`` the template computes is checked *before* it runs, so no
  value larger than the budget's text size is ever built;
* every call (filters, methods, globals) is refused when an integer argument is larger than
  :data:`MAX_INT_ARGUMENT` (a width, a count) or a format string asks for a larger field, and its
  result is checked against the text size;
* the render runs under a line tracer that stops it at the deadline (a loop that prints nothing);
* the output is collected piece by piece and stopped when it outgrows the text size.

An over-budget template raises :class:`TemplateBudgetError`.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.marked_text import MarkedText, remark

BASE_SECONDS = 2.0  # rendering time any conversation may take
SECONDS_PER_MB = 1.0  # and per MB of message text
BASE_CHARS = 1 << 20  # characters any value or output may have beyond what the messages bring
CHARS_PER_MESSAGE_CHAR = 4  # a template may repeat the messages a few times (tools, reasoning)
MAX_INT_ARGUMENT = 100_000  # the largest width or count a call may ask for (Jinja's range cap)
MAX_POWER_BITS = 4096  # the largest integer ** or * may produce, in bits
# a field width or precision of a million or more, in a printf-style and in a str.format format
_PERCENT_FIELD = re.compile(r"%[-#0 +]*(?:\d{6,}|\*|\d*\.\d{6,})")
_BRACE_FIELD = re.compile(r"\{[^{}]*:[^{}]*\d{6,}[^{}]*\}")


class TemplateBudgetError(Exception):
    """The template went over its budget; the message says which limit."""


@dataclass(frozen=True)
class Budget:
    max_chars: int
    seconds: float

    @classmethod
    def for_messages(cls, message_chars: int) -> Budget:
        return cls(max_chars=BASE_CHARS + CHARS_PER_MESSAGE_CHAR * message_chars,
                   seconds=BASE_SECONDS + SECONDS_PER_MB * message_chars / 1e6)


_active = threading.local()


def _budget() -> Budget:
    return getattr(_active, "budget", None) or Budget.for_messages(0)


def _size(count: int, like: Any) -> str:
    return f"{count:,} {'characters' if isinstance(like, (str, bytes)) else 'items'}"


def _check_size(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes, list, tuple)) and len(value) > _budget().max_chars:
        raise TemplateBudgetError(f"{what} built {_size(len(value), value)}, over the limit of "
                                  f"{_size(_budget().max_chars, value)}")
    return value


def _check_arguments(args: tuple, kwargs: dict, what: str) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT_ARGUMENT:
            raise TemplateBudgetError(f"{what} was asked for {value:,} (the limit is {MAX_INT_ARGUMENT:,})")


def _check_format(text: Any, fields: re.Pattern, what: str) -> None:
    if isinstance(text, str) and fields.search(text):
        raise TemplateBudgetError(f"{what} was given a format with a field of a million characters or more")


def _sequence_length(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    limit = _budget().max_chars
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            size = _sequence_length(seq)
            if size is not None and isinstance(times, int) and size * max(times, 0) > limit:
                raise TemplateBudgetError(f"'*' would build {_size(size * times, seq)}, over the limit of "
                                          f"{_size(limit, seq)}")
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_POWER_BITS:
            raise TemplateBudgetError("'*' would build a number too large to print")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() * max(right, 0) > MAX_POWER_BITS:
            raise TemplateBudgetError("'**' would build a number too large to print")
    elif operator == "+":
        sizes = (_sequence_length(left), _sequence_length(right))
        if None not in sizes and sizes[0] + sizes[1] > limit:
            raise TemplateBudgetError(f"'+' would build {_size(sizes[0] + sizes[1], left)}, over the limit of "
                                      f"{_size(limit, left)}")
    elif operator == "%":
        _check_format(left, _PERCENT_FIELD, "'%'")


def _limited(function: Callable, name: str) -> Callable:
    """``function`` (a filter) with its arguments and result checked; its value itself is not."""
    value_at = 1 if getattr(function, "jinja_pass_arg", None) else 0  # after Jinja's context, if it takes one

    @functools.wraps(function)  # keeps ``jinja_pass_arg``, which tells Jinja what to pass
    def call(*args: Any, **kwargs: Any) -> Any:
        _check_arguments(args[value_at + 1:], kwargs, f"'{name}'")
        if name == "format" and len(args) > value_at:
            _check_format(args[value_at], _PERCENT_FIELD, "'format'")
        if len(args) > value_at and isinstance(args[value_at], MarkedText):  # filter the text, keep it marked
            value = args[value_at]._text
            result = function(*args[:value_at], value, *args[value_at + 1:], **kwargs)
            return _check_size(remark(result), f"'{name}'")
        return _check_size(function(*args, **kwargs), f"'{name}'")

    return call


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every operator, call and filter held to the active budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals.pop("lipsum", None)  # writes paragraphs of filler on request; no template needs it
        self.filters = {name: _limited(function, name) for name, function in self.filters.items()}

    def add_filter(self, name: str, function: Callable) -> None:
        self.filters[name] = _limited(function, name)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return _check_size(super().call_binop(context, operator, left, right), f"'{operator}'")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
        name = getattr(__obj, "__name__", "a call")
        _check_arguments(args, kwargs, f"'{name}'")
        if name in ("format", "format_map"):
            _check_format(getattr(__obj, "__self__", None), _BRACE_FIELD, "'format'")
        return _check_size(super().call(__context, __obj, *args, **kwargs), f"'{name}'")


@contextmanager
def budget_in_force(budget: Budget) -> Iterator[None]:
    """Hold everything rendered on this thread inside the ``with`` to ``budget``, deadline included."""
    deadline = time.monotonic() + budget.seconds

    def trace(frame: Any, event: str, arg: Any) -> Callable:
        if time.monotonic() > deadline:
            raise TemplateBudgetError(f"rendering took longer than {budget.seconds:.0f} s")
        return trace

    previous_budget, previous_trace = getattr(_active, "budget", None), sys.gettrace()
    _active.budget = budget
    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous_trace)
        _active.budget = previous_budget


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
