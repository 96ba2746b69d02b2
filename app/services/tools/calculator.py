"""The ``calculator`` tool: arithmetic on numbers, evaluated from Python's syntax tree, never by ``eval``.

Allowed: numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the functions ``sqrt sin cos
tan log exp`` called with plain arguments, and the constants ``pi`` and ``e``. Any other name, an
attribute, a subscript, a string, a keyword argument or any other kind of expression is refused.

Bounded: the expression is at most :data:`MAX_EXPRESSION_CHARS` long, and a whole number may have at
most :data:`MAX_BITS` bits. A power is refused before it is computed when its result would be larger
(``9**9**9`` would take minutes and gigabytes), and every other result is checked after, which keeps
each step cheap: a product of two allowed numbers costs microseconds.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from app.services.tools.tool_problem import ToolProblem

NAME = "calculator"
DESCRIPTION = ("Work out an arithmetic expression exactly, e.g. '(2.5 + 4) * 3**2 / 7' or 'sqrt(2) * sin(pi / 4)'. "
               "Knows + - * / // (whole division) % (remainder) ** (power), parentheses, sqrt, sin, cos, tan "
               "(radians), log (natural; log(x, base) for another base), exp, pi and e.")
PARAMETERS = ('{"type": "object", "properties": {"expression": {"type": "string", "minLength": 1, '
              '"description": "The arithmetic expression to work out."}}, "required": ["expression"], '
              '"additionalProperties": false}')

MAX_EXPRESSION_CHARS = 1000
MAX_BITS = 10_000  # about 3,000 decimal digits

_BINARY: dict[type, Callable] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                                 ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
                                 ast.Pow: operator.pow}
_UNARY: dict[type, Callable] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable] = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan,
                                   "log": math.log, "exp": math.exp}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def calculate(arguments: dict) -> str:
    """The tool: the expression and its value, e.g. "2 + 2 = 4".

    Raises:
        ToolProblem: The expression is not arithmetic this tool knows, too long, or its value cannot
            be worked out (division by zero, a number too large, outside a function's range).
    """
    expression = str(arguments.get("expression", "")).strip()
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise _refused(f"the expression is longer than {MAX_EXPRESSION_CHARS:,} characters")
    try:
        value = _value(ast.parse(expression, mode="eval").body)
    except SyntaxError:
        raise _refused("it is not an arithmetic expression it can read") from None
    except ZeroDivisionError:
        raise _refused("it divides by zero") from None
    except (OverflowError, MemoryError):
        raise _refused("a number in it is too large") from None
    except ValueError:
        raise _refused("a value in it is outside what a function or power can take (such as the square root "
                       "of a negative number)") from None
    except TypeError:
        raise _refused("a function in it was given the wrong number of values") from None
    except RecursionError:
        raise _refused("it is nested too deeply") from None
    return f"{expression} = {_shown(value)}"


def _refused(reason: str) -> ToolProblem:
    return ToolProblem(f"The tool '{NAME}' could not work this out: {reason}.")


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if _is_function_call(node):
        return _checked(_FUNCTIONS[node.func.id](*(_value(argument) for argument in node.args)))
    raise _refused(f"it may only use numbers, + - * / // % **, parentheses, {', '.join(_FUNCTIONS)}, pi and e, "
                   f"and '{_source(node)}' is none of those")


def _is_function_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and not node.keywords and 1 <= len(node.args) <= 2
            and not any(isinstance(argument, ast.Starred) for argument in node.args))


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose result would be too large, before computing it."""
    if abs(base) <= 1 or exponent <= 0:
        return
    if exponent * math.log2(abs(base)) > MAX_BITS:
        raise OverflowError("power too large")


def _checked(value: object) -> int | float:
    if isinstance(value, complex):  # a negative number to a fractional power
        raise ValueError("complex result")
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise OverflowError("integer too large")
    if isinstance(value, float) and math.isinf(value):
        raise OverflowError("float too large")
    return value  # type: ignore[return-value]


def _shown(value: int | float) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            raise _refused("its value is not a number")
        return f"{value:.15g}"
    return str(value)


def _source(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:39] + "…"
