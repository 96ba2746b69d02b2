"""A llama.cpp grammar (GBNF) for exactly one well-formed function call in a family's own form
(:mod:`engine.templates.tool_formats`), of one named tool or of any offered one.

The call's frame is written as literals, markers included (``<tool_call>``, ``<|tool_call_start|>``:
llama.cpp's grammar matches a control token by its text). The arguments are held to the tool's
parameters schema through the project's wrapper of llama-cpp-python's JSON-schema converter
(:class:`engine.backends.llama_grammar.SchemaRules`), with the same checks and safety fixes as an
answer held to a schema: a schema it cannot hold the answer to is refused (ConstraintRefused), never
passed over. A tool without parameters takes ``{}`` (no arguments).

* ``hermes`` and ``llama3``: the arguments are one JSON object of the schema, written after
  ``"arguments": `` or ``"parameters": ``; Llama 3's grammar has no ``<|python_tag|>`` (its template
  writes calls without it).
* ``qwen-xml`` and ``lfm2`` write each parameter on its own, in the order of the schema's
  ``properties``: the required ones always, the optional ones where the model wants them; no others.
  A schema without ``properties`` (any object) takes any parameter names.
* ``qwen-xml``: a parameter read as text (:func:`~engine.templates.tool_formats.is_text_parameter`) is
  any text without ``<`` (so it cannot hold ``</parameter>``), held to its ``enum``, ``const`` and
  lengths but not to a ``pattern`` or ``format``; a boolean may be written ``true`` or ``True`` (Jinja
  writes Python's spelling); other values are JSON of their schema.
* ``lfm2``: values are Python literals of the schema: strings double-quoted with JSON's escapes (but
  ``\\/``, which Python reads otherwise), ``True``, ``False``, ``None``; parameter names must be Python
  names.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.backends.llama_grammar import JSON_CHAR, ConstraintRefused, SchemaRules
from engine.protocol.tools import ToolSpec
from engine.templates.tool_reading import is_text_parameter, python_literal

PY_CHAR = JSON_CHAR.replace(r'["\\/bfnrt]', r'["\\bfnrt]')
PYTHON_PRIMITIVES = {"boolean": '("True" | "False") space', "null": '"None" space', "char": PY_CHAR}
ANY_VALUE = {"type": ["string", "number", "boolean", "null", "object", "array"]}
NAME = "[A-Za-z_] [A-Za-z0-9_]*"  # a parameter's name where the schema names none
_FRAMES = {  # form: (what comes before the tool's name, what ends the call)
    "hermes": ('<tool_call>\n{"name": "', "}\n</tool_call>"),
    "llama3": ('{"name": "', "}"),
    "qwen-xml": ("<tool_call>\n<function=", "</function>\n</tool_call>"),
    "lfm2": ("<|tool_call_start|>[", ")]<|tool_call_end|>"),
}


def call_grammar(form: str, tools: Sequence[ToolSpec], name: str | None) -> str:
    """GBNF, root rule ``root``, for one call in ``form`` of ``name`` (or of any of ``tools``)."""
    chosen = [tool for tool in tools if name is None or tool.name == name]
    if not chosen:
        raise ConstraintRefused(f"the tool {name!r} is not among the offered tools" if name else "no tools are offered")
    grammar = _Grammar(SchemaRules(python_literal, PYTHON_PRIMITIVES) if form == "lfm2" else SchemaRules())
    write = {"hermes": _json_arguments("arguments"), "llama3": _json_arguments("parameters"), "qwen-xml": _xml_call,
             "lfm2": _pythonic_call}[form]
    opening, closing = _FRAMES[form]
    calls = [grammar.add(f"call-{i}", write(grammar, i, tool)) for i, tool in enumerate(chosen)]
    return grammar.text(f"{literal(opening)} ({' | '.join(calls)}) {literal(closing)}")


class _Grammar:
    """The rules of one call's grammar: the converter's and this module's own."""

    def __init__(self, rules: SchemaRules) -> None:
        self.rules = rules
        self._lines: list[str] = []

    def add(self, name: str, body: str) -> str:
        self._lines.append(f"{name} ::= {body}")
        return name

    def parameters(self, tool: ToolSpec, i: int) -> tuple[list[tuple[str, dict, bool]], bool]:
        """The tool's parameters (name, schema, required) in order, and whether others may be named."""
        if not tool.parameters.strip():
            return [], False
        schema = self.rules.read(tool.parameters, f"tool{i}")
        if {"$ref", "anyOf", "oneOf", "allOf"} & set(schema) or schema.get("type", "object") != "object":
            raise ConstraintRefused(f"the parameters of {tool.name!r} must be an object schema (not a reference or "
                                    "a choice of schemas) for this model's form of calls")
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return [], schema.get("additionalProperties", True) is not False
        required = set(schema.get("required", []))
        return [(key, sub, key in required) for key, sub in properties.items()], False

    def text(self, root: str) -> str:
        return "\n".join([f"root ::= {root}", *self._lines, self.rules.text()]) + "\n"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def literal(text: str) -> str:
    """``text`` as a GBNF literal."""
    return '"' + "".join(_ESCAPES.get(c) or (c if c >= " " else f"\\x{ord(c):02X}") for c in text) + '"'


def _json_arguments(key: str):
    def write(grammar: _Grammar, i: int, tool: ToolSpec) -> str:
        head = literal(f'{tool.name}", "{key}": ')
        if not tool.parameters.strip():
            return f'{head} "{{}}"'
        return f"{head} {grammar.rules.rule(grammar.rules.read(tool.parameters, f'tool{i}'), f'tool{i}-args')}"

    return write


def _xml_call(grammar: _Grammar, i: int, tool: ToolSpec) -> str:
    parameters, open_names = grammar.parameters(tool, i)
    items = []
    for j, (key, schema, required) in enumerate(parameters):
        opening, closing = literal(f"<parameter={key}>\n"), literal("\n</parameter>\n")
        item = f"{opening} {_xml_value(grammar, schema, f'tool{i}-p{j}')} {closing}"
        items.append(item if required else f"( {item} )?")
    if open_names:
        items.append(f'( "<parameter=" {NAME} ">\\n" [^<]* "\\n</parameter>\\n" )*')
    return " ".join([literal(f"{tool.name}>\n"), *items])


def _xml_value(grammar: _Grammar, schema: dict, name: str) -> str:
    """A Qwen XML parameter's value: text without ``<`` (or one of its enum's), or JSON of its schema."""
    if not is_text_parameter(schema):
        if schema.get("type") == "boolean" and not {"enum", "const"} & set(schema):
            return '("true" | "false" | "True" | "False")'
        return grammar.rules.rule(schema, name)
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if choices is not None:
        return "(" + " | ".join(literal(c if isinstance(c, str) else python_literal(c)) for c in choices) + ")"
    low, high = schema.get("minLength", 0), schema.get("maxLength", "")
    return f"[^<]{{{low},{high}}}" if (low, high) != (0, "") else "[^<]*"


def _pythonic_call(grammar: _Grammar, i: int, tool: ToolSpec) -> str:
    parameters, open_names = grammar.parameters(tool, i)
    items = []
    for j, (key, schema, required) in enumerate(parameters):
        if not key.isidentifier():
            raise ConstraintRefused(f"the parameter {key!r} of {tool.name!r} is not a Python name, which LFM2's "
                                    "call form needs")
        items.append((f"{literal(key + '=')} {grammar.rules.rule(schema, f'tool{i}-p{j}')}", required))
    head = literal(f"{tool.name}(")
    if open_names:
        value = grammar.rules.rule(ANY_VALUE, f"tool{i}-any")
        return f'{head} ( {NAME} "=" {value} ( ", " {NAME} "=" {value} )* )?'
    return f"{head} {_joined(grammar, items, f'call-{i}')}" if items else head


def _joined(grammar: _Grammar, items: list[tuple[str, bool]], prefix: str) -> str:
    """``items`` (GBNF, required) in order with ``", "`` between those written; the optional ones may be
    left out. ``after-k``: items k on, each after a comma; ``from-k``: the same, the first without one."""
    after: str | None = None
    first: str | None = None
    for k in range(len(items) - 1, -1, -1):
        item, required = items[k]
        tail = f" {after}" if after else ""
        if k:  # the first item is never written after a comma
            after = grammar.add(f"{prefix}-after-{k}", (f'", " {item}' if required else f'( ", " {item} )?') + tail)
        if required:
            body = f"{item}{tail}"
        else:
            body = f"( {item}{tail} )?" if first is None else f"{item}{tail} | {first}"
        first = grammar.add(f"{prefix}-from-{k}", body)
    return first or ""
