"""Jinja2's immutable sandbox with every operation a chat template can build with held to the budget.

What a template can build with, and where each is caught (all against the ledger of
:mod:`engine.templates.template_budget`, with estimates from :mod:`engine.templates.template_sizes`):

* operators ``+ - * / // % **`` (:meth:`BudgetedSandbox.call_binop`: the sandbox routes every
  operator named in ``intercepted_binops`` here), and ``~``, which Jinja compiles to a plain string
  join: :class:`_BudgetedCodeGenerator` compiles it to :meth:`BudgetedSandbox.budgeted_concat` instead;
* filters (each wrapped when the environment is made) and calls of methods and globals
  (:meth:`BudgetedSandbox.call`), ``str.format`` included (:meth:`BudgetedSandbox.wrap_str_format`);
* slices (:meth:`BudgetedSandbox.getitem`), what ``{{ … }}`` prints (``finalize``), and the text of
  a block, a macro's included (:meth:`BudgetedSandbox.concat`, which Jinja's code calls for them);
* ``sum``, which Python runs in C and in quadratic time for lists (a bomb ran a minute), is
  replaced by :func:`_budgeted_sum`, which adds one item at a time through the budgeted ``+``.

Every one of these checks the deadline as well; loops are checked by the render's line tracer.
"""

from __future__ import annotations

import functools
import operator as op
from collections.abc import Callable
from typing import Any

from jinja2 import pass_context
from jinja2.compiler import CodeGenerator, optimizeconst
from jinja2.filters import make_attrgetter
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.templates.marked_text import MarkedText, remark
from engine.templates.template_budget import (MAX_POWER_BITS, TemplateBudgetError, afford, check_comparison, check_deadline,
                                    check_int_arguments, max_chars, spend)
from engine.templates.template_sizes import (ESTIMATES, METHOD_ESTIMATES, NOT_COUNTED, compared_chars, format_size, items_size,
                                   rendered_size, sorted_chars, units)


class _BudgetedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with ``a ~ b ~ c`` compiled to ``environment.budgeted_concat(context, (a, b, c))``
    and ``a in b`` (any comparison) to ``environment.compare(a, (("in", b),))``."""

    @optimizeconst
    def visit_Compare(self, node: Any, frame: Any) -> None:
        self.write("environment.compare(")
        self.visit(node.expr, frame)
        self.write(", (")
        for operand in node.ops:
            self.write(f"({operand.op!r}, ")
            self.visit(operand.expr, frame)
            self.write("), ")
        self.write("))")

    @optimizeconst
    def visit_Concat(self, node: Any, frame: Any) -> None:
        self.write("environment.budgeted_concat(context, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _binop_size(operator: str, left: Any, right: Any) -> int:
    """What ``left operator right`` would build (refusing numbers too large to print)."""
    if operator == "+":
        if isinstance(left, str) and isinstance(right, str):
            return str.__len__(left) + str.__len__(right)
        if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            return items_size(left) + items_size(right)
    elif operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                per = str.__len__(seq) if isinstance(seq, str) else items_size(seq)
                return per * max(times, 0)
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_POWER_BITS:
            raise TemplateBudgetError("'*' would build a number too large to print")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() * max(right, 0) > MAX_POWER_BITS:
            raise TemplateBudgetError("'**' would build a number too large to print")
    elif operator == "%" and isinstance(left, str):
        return format_size(left, right)
    return 0


def _estimate(name: str, args: tuple, kwargs: dict, estimates: dict[str, Callable[..., int]]) -> int:
    estimate = estimates.get(name)
    if estimate is None or not args:
        return 0
    try:
        return estimate(*args, **kwargs)
    except TypeError:
        return 0  # arguments the operation itself will refuse


def _budgeted(name: str, run: Callable[..., Any], args: tuple, kwargs: dict,
              estimates: dict[str, Callable[..., int]] = ESTIMATES) -> Any:
    """``run(*args, **kwargs)``, paid for before (the estimate) and counted after (what it built).
    ``args[0]`` is the value filtered, or the string whose method is called."""
    check_int_arguments(args[1:], kwargs, f"'{name}'")
    joined = 0 if estimates is ESTIMATES else 1  # where join's items are: join(items, sep), sep.join(items)
    if name == "join" and len(args) > joined and not isinstance(args[joined], (str, list, tuple)):
        args = (*args[:joined], _listed(args[joined]), *args[joined + 1:])  # a generator: listed once, to measure and join
    afford(_estimate(name, args, kwargs, estimates), f"'{name}'")
    if name in _SORTING and args:
        check_comparison(sorted_chars(args[0]), f"'{name}'")
    result = run(*args, **kwargs)
    spend(units(result))
    return result


_SORTING = frozenset({"sort", "dictsort", "groupby"})  # they sort in C, comparing items with each other


def _listed(items: Any) -> list:
    listed = list(items)
    spend(items_size(listed))
    return listed


def _budgeted_filter(function: Callable, name: str) -> Callable:
    """``function`` (a filter) held to the budget; a marked message is filtered as its text and stays marked."""
    value_at = 1 if getattr(function, "jinja_pass_arg", None) else 0  # after Jinja's context, if it takes one
    if name in NOT_COUNTED:
        return function

    @functools.wraps(function)  # keeps ``jinja_pass_arg``, which tells Jinja what to pass
    def call(*args: Any, **kwargs: Any) -> Any:
        passed, own = args[:value_at], args[value_at:]
        if own and isinstance(own[0], MarkedText):
            own = (own[0]._text, *own[1:])
            return remark(_budgeted(name, lambda *a, **k: function(*passed, *a, **k), own, kwargs))
        return _budgeted(name, lambda *a, **k: function(*passed, *a, **k), own, kwargs)

    return call


@pass_context
def _budgeted_sum(context: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """Jinja's ``sum``, adding one item at a time through the budgeted ``+`` (Python's ``sum`` of
    lists builds every partial list, in C, where no deadline can stop it)."""
    if attribute is not None:
        iterable = map(make_attrgetter(context.environment, attribute), iterable)
    if isinstance(start, str):
        return sum(iterable, start)  # Python refuses strings, and so does Jinja
    total = start
    for item in iterable:
        total = context.environment.call_binop(context, "+", total, item)
    return total


def _check_printed(value: Any) -> Any:
    """What ``{{ value }}`` prints is refused before ``str()`` builds it if it cannot fit the output."""
    if not isinstance(value, str) and rendered_size(value, max_chars()) > max_chars():
        raise TemplateBudgetError(f"printing a value would write more than {max_chars():,} characters")
    return value


_COMPARISONS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "eq": ("==", op.eq), "ne": ("!=", op.ne), "gt": (">", op.gt), "gteq": (">=", op.ge), "lt": ("<", op.lt),
    "lteq": ("<=", op.le), "in": ("in", lambda a, b: a in b), "notin": ("not in", lambda a, b: a not in b),
}


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every operator, call and filter held to the active budget."""

    code_generator_class = _BudgetedCodeGenerator
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, **options: Any) -> None:
        # optimized=False: Jinja would otherwise run constant filters while compiling and write what they
        # built into the template's Python source ([1] | batch(100000, 'x') became a 70 MB compile)
        super().__init__(finalize=_check_printed, optimized=False, **options)
        self.globals.pop("lipsum", None)  # writes paragraphs of filler on request; no template needs it
        self.filters["sum"] = _budgeted_sum
        self.filters = {name: _budgeted_filter(function, name) for name, function in self.filters.items()}

    @staticmethod
    def concat(pieces: Any) -> str:
        """The text of a block (``{% set x %}…{% endset %}``, a macro, a ``{% filter %}``) joined."""
        pieces = list(pieces)
        afford(sum(str.__len__(piece) for piece in pieces), "a block")
        result = "".join(pieces)
        spend(str.__len__(result))
        return result

    def add_filter(self, name: str, function: Callable) -> None:
        self.filters[name] = _budgeted_filter(function, name)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        afford(_binop_size(operator, left, right), f"'{operator}'")
        result = super().call_binop(context, operator, left, right)
        spend(units(result))
        return result

    def budgeted_concat(self, context: Any, values: tuple) -> str:
        """``a ~ b``: every operand as text, joined."""
        afford(sum(rendered_size(value) for value in values), "'~'")
        result = (markup_join if context.eval_ctx.autoescape else str_join)(values)
        spend(str.__len__(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (list, tuple)) and getattr(__obj, "__name__", "") in ("count", "index") and args:
            check_comparison(compared_chars("in", args[0], owner), f"'{__obj.__name__}'")
        if isinstance(owner, str):  # a str method: estimated with the string as its first operand
            name = __obj.__name__
            return _budgeted(name, lambda *a, **k: super(BudgetedSandbox, __self).call(__context, __obj, *a[1:], **k),
                             (owner, *args), kwargs, METHOD_ESTIMATES)
        check_deadline()
        check_int_arguments(args, kwargs, f"'{getattr(__obj, '__name__', 'a call')}'")
        result = super().call(__context, __obj, *args, **kwargs)
        spend(units(result))
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt, is_map = value.__self__, value.__name__ == "format_map"

        def formatted(*args: Any, **kwargs: Any) -> str:
            afford(format_size(fmt, args[0] if is_map and args else (kwargs or args)), "'format'")
            result = wrapped(*args, **kwargs)
            spend(str.__len__(result))
            return result

        return formatted

    def compare(self, left: Any, operations: tuple) -> bool:
        """``left op1 right1 op2 right2 …`` as Python chains it (the operands were all evaluated first),
        each comparison refused if it would compare more than the limit."""
        result: Any = True
        for operator, right in operations:
            check_comparison(compared_chars(operator, left, right), f"'{_COMPARISONS[operator][0]}'")
            result = _COMPARISONS[operator][1](left, right)
            if not result:
                return result
            left = right
        return result

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_deadline()
        if isinstance(argument, slice) and isinstance(obj, (str, list, tuple)):
            afford(str.__len__(obj) if isinstance(obj, str) else items_size(obj), "a slice")
            result = super().getitem(obj, argument)
            spend(units(result))
            return result
        return super().getitem(obj, argument)

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_deadline()
        return super().getattr(obj, attribute)

