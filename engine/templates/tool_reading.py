"""Reading and writing the pieces of a call, for :mod:`engine.templates.tool_formats`: JSON at a place in
the text, Qwen's XML tags, Python calls through :mod:`ast` (literals only: nothing is evaluated), the
checks of a call's name and arguments against the offered tools, and the values written back."""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import warnings
from typing import Any

from engine.protocol.tools import ToolCall, ToolSpec

CUT_OFF = "the answer ends inside a call, before the call's end"
_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_NOT_TEXT = frozenset({"number", "integer", "boolean", "null", "object", "array"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACE = re.compile(r"\s*")


class NotCalls(Exception):
    """Text that looks like calls cannot be read as calls; the message says why, in one sentence."""


def skip_space(text: str, at: int, blanks: str = "") -> int:
    """The first index from ``at`` that is not white space (or one of ``blanks``, when given)."""
    if not blanks:
        return _SPACE.match(text, at).end()
    while at < len(text) and text[at] in blanks:
        at += 1
    return at


def partial_tail(text: str, marker: str) -> int:
    """The length of the longest end of ``text`` that begins ``marker`` without completing it."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _refuse_constant(word: str) -> None:
    raise ValueError(f"{word} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def json_at(text: str, at: int) -> tuple[Any, int]:
    """The JSON value at ``at`` and where it ends."""
    try:
        return _DECODER.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        rest = text[exc.pos:exc.pos + 8].rstrip() if len(text) - exc.pos < 8 else None  # where the text ends
        if exc.msg.startswith("Unterminated string") or rest is not None and any(
                word.startswith(rest) for word in ("true", "false", "null")):
            raise NotCalls(CUT_OFF) from None
        raise NotCalls(f"a call is not valid JSON ({exc.msg} at character {exc.pos - at + 1} of the call)") from None
    except (ValueError, RecursionError):  # NaN or Infinity, a number too long, nesting too deep
        raise NotCalls("a call is not valid JSON") from None


def named_call(value: Any, keys: tuple[str, ...]) -> tuple[str, Any]:
    """The name and arguments of a call written as a JSON object (the arguments under the first of
    ``keys`` it has; none: no arguments)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise NotCalls("a call is not a JSON object with the function's name under \"name\"")
    arguments = next((value[key] for key in keys if key in value), {})
    return value["name"], arguments


def _short(name: str) -> str:
    return repr(name if len(name) <= 64 else name[:64] + "...")


def checked(name: str, arguments: Any, tools: dict[str, ToolSpec]) -> tuple[str, str]:
    """A call as :class:`ParsedAnswer` holds it, if ``name`` is offered and ``arguments`` an object."""
    if name not in tools:
        raise NotCalls(f"the answer calls the function {_short(name)}, which is not among the offered tools")
    if isinstance(arguments, str):  # some models write the arguments' JSON as a string
        try:
            arguments = _DECODER.decode(arguments)
        except (ValueError, RecursionError):
            pass
    if not isinstance(arguments, dict):
        raise NotCalls(f"the arguments of the call to {_short(name)} are not an object")
    try:
        written = json.dumps(arguments, ensure_ascii=False)
    except ValueError:  # an integer too long to write
        raise NotCalls(f"the arguments of the call to {_short(name)} hold a number too long") from None
    if _SURROGATE.search(written):  # pairs written as two escapes join; a lone half becomes U+FFFD
        written = written.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return name, written


def xml_call(text: str, at: int, tools: dict[str, ToolSpec]) -> tuple[str, dict, int]:
    """One Qwen XML call whose ``<tool_call>`` ends at ``at``: its name, arguments and end."""
    name, at = _xml_tag(text, skip_space(text, at), "<function=")
    properties = _parameter_schemas(tools[name].parameters) if name in tools else {}
    arguments = {}
    while True:
        at = skip_space(text, at)
        if text.startswith("<parameter=", at):
            key, at = _xml_tag(text, at, "<parameter=")
            end = text.find("</parameter>", at)
            if end < 0:
                raise NotCalls(CUT_OFF)
            arguments[key] = _xml_value(_one_newline_off(text[at:end]), properties.get(key))
            at = end + len("</parameter>")
        elif text.startswith("</function>", at):
            break
        else:
            _cut_off_at(text, at, "<parameter=", "</function>")
            raise NotCalls(f"the call to {_short(name)} holds text that is not a <parameter=...> or its </function>")
    at = skip_space(text, at + len("</function>"))
    if not text.startswith("</tool_call>", at):
        _cut_off_at(text, at, "</tool_call>")
        raise NotCalls(f"the call to {_short(name)} does not end with </tool_call>")
    return name, arguments, at + len("</tool_call>")


def _cut_off_at(text: str, at: int, *tags: str) -> None:
    """Raise :data:`CUT_OFF` if the text ends at ``at`` or inside one of ``tags`` begun there."""
    if any(tag.startswith(text[at:at + len(tag)]) and len(text) - at < len(tag) for tag in tags):
        raise NotCalls(CUT_OFF)


def _xml_tag(text: str, at: int, opening: str) -> tuple[str, int]:
    """The name in ``<function=NAME>`` or ``<parameter=NAME>`` at ``at``, and where the tag ends."""
    if not text.startswith(opening, at):
        _cut_off_at(text, at, opening)
        raise NotCalls(f"a call's {opening}...> is missing")
    start = at + len(opening)
    end = text.find(">", start, start + 256)  # a name is short: never scan the rest of a long answer
    if end < 0:
        raise NotCalls(CUT_OFF if len(text) < start + 256 else f"a call's {opening}... tag does not close")
    return text[start:end].strip(), end + 1


def _one_newline_off(value: str) -> str:
    """A parameter's text without the newline written on each side of it."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def is_text_parameter(schema: Any) -> bool:
    """Whether a Qwen XML parameter's value is kept as raw text: its schema's type is string, or it
    gives no JSON type (no schema, no ``type``, or a list of types with string among them)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    kinds = kind if isinstance(kind, list) else [kind]
    return "string" in kinds or not any(isinstance(k, str) and k in _NOT_TEXT for k in kinds)


def _xml_value(raw: str, schema: Any) -> Any:
    if is_text_parameter(schema):
        return raw
    written = raw.strip()
    try:
        return _DECODER.decode(written)
    except (ValueError, RecursionError):
        return _NAMES[written] if written in _NAMES else raw  # Jinja writes true as True


@functools.lru_cache(maxsize=64)
def _parameter_schemas(parameters: str) -> dict[str, Any]:
    """The schemas of a tool's parameters by name, from its parameters' JSON schema text ({} if none)."""
    try:
        schema = json.loads(parameters) if parameters.strip() else {}
    except (ValueError, RecursionError):
        return {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) else {}


def pythonic_calls(source: str) -> list[tuple[str, dict]]:
    """The calls in ``[f(a=1), g(b="x")]`` (a list of Python calls with literal keyword values)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape in a string warns
            tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotCalls("the calls are not Python function calls with literal values") from None
    items = tree.body.elts if isinstance(tree.body, (ast.List, ast.Tuple)) else [tree.body]
    return [_pythonic_call(item) for item in items]


def _pythonic_call(node: ast.expr) -> tuple[str, dict]:
    name = _dotted(node.func) if isinstance(node, ast.Call) else None
    if name is None:
        raise NotCalls("the calls list holds something that is not a call of a function by its name")
    if node.args or any(keyword.arg is None for keyword in node.keywords):
        raise NotCalls(f"the call to {_short(name)} passes arguments without their names")
    return name, {keyword.arg: _literal(keyword.value) for keyword in node.keywords}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """The JSON value a Python literal node writes (``true``, ``false`` and ``null`` taken as names)."""
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (str, bool, int, float)):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise NotCalls("a call's argument is a number JSON cannot hold")
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        value = _literal(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict) and all(isinstance(key, ast.Constant) and type(key.value) is str
                                          for key in node.keys):
        return {key.value: _literal(value) for key, value in zip(node.keys, node.values)}
    raise NotCalls("a call's argument is not a literal value (text, a number, true/false, null, a list or "
                   "a dict with text keys)")


# --- writing --------------------------------------------------------------------------------------


def arguments_of(call: ToolCall) -> dict:
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def xml_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def python_literal(value: Any) -> str:
    """A JSON value as a Python literal: strings double-quoted as JSON writes them, True, False, None."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json_text(str(k))}: {python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    return json_text(value)
