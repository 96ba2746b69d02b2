"""What an answer held to a JSON schema may ask for, checked in pure Python on both sides of the pipe.

The worker holds decoding to a schema through llama.cpp's grammar, which llama-cpp-python's converter
makes from the schema (:mod:`engine.backends.llama_grammar`). The converter understands part of JSON
Schema and passes over the rest without a word: ``minimum``, ``multipleOf``, ``uniqueItems``, an
unknown ``format``, ``maxLength`` next to a list of types, anything beside a ``$ref``... An answer
"matching" a schema Hearth did not hold it to would mislead the program that asked. So a schema is
checked here first, keyword by keyword: a keyword that constrains the value must be one the converter
holds the model to, in a place where it does (the converter reads one group of keywords per schema:
:func:`_read_by_converter`); anything else is refused by name and place, never ignored. Annotations
(``title``, ``description``...) are allowed and dropped before the conversion.

The app calls :func:`constraint_from_schema_text` (the API's ``response_format``, the CLI's
``--json-schema``) and :func:`schema_problem`; the worker reads what it was sent with
:func:`bare_schema`, so both sides refuse with the same words.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.protocol.commands import OutputConstraint
from engine.protocol.limits import MAX_CONSTRAINT_NAME, MAX_SCHEMA_BYTES

MAX_DEPTH = 32  # schemas nested deeper are refused (the converter recurses, and so does its grammar)
# minLength/maxLength/minItems/maxItems above this are refused: the converter writes a length of n as
# n nested optional groups, which llama.cpp must expand at every step.
MAX_REPEAT = 256

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})
# Keywords that say what a value means, not what it may be (``discriminator`` names which of oneOf's
# schemas a value takes, which oneOf holds anyway).
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
                         "readOnly", "writeOnly", "discriminator"})
DEFINITIONS = ("$defs", "definitions")  # named schemas a "$ref" may point to
FORMATS = frozenset({"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"})
LENGTHS = ("minLength", "maxLength", "minItems", "maxItems")
# What a pattern may hold besides letters and digits: the converter passes the rest to the grammar as it
# is, so a backslash escape, a quote or a negated class could let the answer's JSON break.
PATTERN_SYNTAX = set("()|?*+{},.[]-")
PATTERN_PLAIN = set(" !#%&'/:;<=>@_`~")

_UNSUPPORTED = "Hearth cannot hold the model to it; remove it and check the value in your program"


class _Refused(Exception):
    """A schema the converter would not hold the answer to; the message says what and where."""


def schema_problem(schema: object) -> str | None:
    """What in ``schema`` (a parsed JSON schema) Hearth cannot hold an answer to, in words naming the
    keyword and its place; None when every keyword is held."""
    try:
        _bare(schema)
    except _Refused as refused:
        return str(refused)
    return None


def constraint_from_schema_text(text: str, name: str = "") -> OutputConstraint:
    """The constraint for a schema given as JSON text (``name``: the API's ``json_schema.name``).
    Raises ValueError with a message a user can act on: the text is too long or not JSON (with its
    line and column), it is not an object, or it asks for what Hearth cannot hold (keyword and place)."""
    if len(name) > MAX_CONSTRAINT_NAME:
        raise ValueError(f"the schema's name is {len(name)} characters long; at most {MAX_CONSTRAINT_NAME} are allowed")
    bare_schema(text)
    return OutputConstraint(kind="json_schema", schema=text, name=name)


def bare_schema(text: str) -> dict:
    """The schema in ``text``, checked as :func:`constraint_from_schema_text` checks it and without its
    annotations: what the worker gives the converter. Raises ValueError as that function does."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"the JSON schema is {size:,} bytes long; Hearth takes schemas of up to "
                         f"{MAX_SCHEMA_BYTES // 1024} KiB")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ValueError(f"the JSON schema is nested too deeply (at most {MAX_DEPTH} levels)") from None
    try:
        return _bare(schema)
    except _Refused as refused:
        raise ValueError(str(refused)) from None


def _bare(schema: object) -> dict:
    if not isinstance(schema, dict):
        raise _Refused(f"a JSON schema is an object, got {_kind_of(schema)}")
    return _Walk(schema).schema(schema, (), 0)


def _kind_of(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return {list: "a list", str: "a string", int: "a number", float: "a number", dict: "an object"}.get(
        type(value), type(value).__name__)


def _place(path: tuple[str, ...]) -> str:
    return ".".join(path).replace(".[", "[") if path else "the top level"


class _Walk:
    """One schema's check: each schema in it in turn, its keywords against what the converter reads."""

    def __init__(self, root: dict) -> None:
        self.root = root

    def schema(self, schema: object, path: tuple[str, ...], depth: int) -> dict:
        """``schema`` (at ``path``) checked, with its annotations dropped (and its sub-schemas')."""
        if not isinstance(schema, dict):
            raise _Refused(f"{_place(path)} must be a schema (a JSON object), got {_kind_of(schema)}")
        if depth > MAX_DEPTH:
            raise _Refused(f"the schema is nested too deeply at {_place(path)} (at most {MAX_DEPTH} levels)")
        kept = {key: value for key, value in schema.items() if key not in ANNOTATIONS}
        read, beside = _read_by_converter(kept)
        for key in kept:
            if key not in read and key not in DEFINITIONS:
                where = f" {beside}" if key in _KNOWN else ""
                raise _Refused(f"{key!r} at {_place(path)} is not supported{where}: {_UNSUPPORTED}")
        self._values(kept, path)
        return {key: self._inner(key, value, path, depth) for key, value in kept.items()}

    def _inner(self, key: str, value: Any, path: tuple[str, ...], depth: int) -> Any:
        """A keyword's value with the schemas in it checked."""
        here = path + (key,)
        if key in ("properties", *DEFINITIONS):
            if not isinstance(value, dict):
                raise _Refused(f"{key!r} at {_place(path)} must be an object of schemas")
            return {name: self.schema(sub, here + (name,), depth + 1) for name, sub in value.items()}
        if key in ("anyOf", "oneOf", "allOf", "prefixItems") or (key == "items" and isinstance(value, list)):
            if not isinstance(value, list) or not value:
                raise _Refused(f"{key!r} at {_place(path)} must be a list of schemas")
            return [self.schema(sub, here + (f"[{i}]",), depth + 1) for i, sub in enumerate(value)]
        if key == "items" or (key == "additionalProperties" and not isinstance(value, bool)):
            return self.schema(value, here, depth + 1)
        return value

    def _values(self, schema: dict, path: tuple[str, ...]) -> None:
        """The plain values of ``schema``'s keywords (types, lengths, names), checked."""
        where = _place(path)
        kinds = schema.get("type", "string")
        for kind in kinds if isinstance(kinds, list) else [kinds]:
            if not isinstance(kind, str) or kind not in JSON_TYPES:
                raise _Refused(f"'type' at {where} must be one of {', '.join(sorted(JSON_TYPES))}; got {kind!r}")
        if "format" in schema and not (isinstance(schema["format"], str) and schema["format"] in FORMATS):
            raise _Refused(f"'format': {schema['format']!r} at {where} is not supported (Hearth holds strings to the "
                           f"formats {', '.join(sorted(FORMATS))}): {_UNSUPPORTED}")
        for key in LENGTHS:
            if key in schema and not (type(schema[key]) is int and 0 <= schema[key] <= MAX_REPEAT):
                raise _Refused(f"{key!r} at {where} must be a whole number from 0 to {MAX_REPEAT}; "
                               f"got {schema[key]!r}")
        for low, high in (("minLength", "maxLength"), ("minItems", "maxItems")):
            if schema.get(low, 0) > schema.get(high, MAX_REPEAT):
                raise _Refused(f"{low!r} at {where} is more than {high!r}: no value can match")
        if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
            raise _Refused(f"'enum' at {where} must be a list of at least one value")
        self._required(schema, where)
        if "$ref" in schema:
            self._ref(schema["$ref"], where)
        if "pattern" in schema:
            _check_pattern(schema["pattern"], where)
        if "allOf" in schema:
            self._all_of(schema["allOf"], where)

    def _required(self, schema: dict, where: str) -> None:
        required = schema.get("required", [])
        if not (isinstance(required, list) and all(isinstance(name, str) for name in required)):
            raise _Refused(f"'required' at {where} must be a list of property names")
        properties = schema.get("properties", {})
        for name in required:
            if isinstance(properties, dict) and name not in properties:
                raise _Refused(f"'required' at {where} names {name!r}, which is not among its 'properties'")

    def _all_of(self, parts: object, where: str) -> None:
        """The converter merges allOf's parts into one object of all their properties (each one
        required) and reads nothing else of them: each part must be properties, or a reference to them."""
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue  # refused as it is walked
            target = self._target(part["$ref"]) if isinstance(part.get("$ref"), str) else part
            extra = set(part) - ANNOTATIONS - {"properties", "required", "type", "$ref"}
            if isinstance(target, dict) and "properties" in target and not extra \
                    and target.get("type", "object") == "object" and "additionalProperties" not in target:
                continue
            raise _Refused(f"'allOf' at {where} may only join objects' 'properties' (or references to them): "
                           f"{_UNSUPPORTED}")

    def _target(self, ref: str) -> Any:
        target: Any = self.root
        for step in ref[2:].split("/"):
            if not isinstance(target, dict) or step not in target:
                return None
            target = target[step]
        return target

    def _ref(self, ref: object, where: str) -> None:
        """A ``$ref`` must point into this schema (``#/...``), at a schema that is there."""
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise _Refused(f"'$ref' at {where} must point into this schema ('#/$defs/Name'); got {ref!r} (Hearth "
                           "never fetches schemas)")
        target = self._target(ref)
        if target is None:
            raise _Refused(f"'$ref' at {where} points to {ref!r}, which this schema does not have")
        if not isinstance(target, dict):
            raise _Refused(f"'$ref' at {where} points to {ref!r}, which is not a schema")


def _read_by_converter(schema: dict) -> tuple[frozenset[str], str]:
    """The keywords llama-cpp-python's converter reads in ``schema`` (annotations dropped), and the
    keyword that decided it, in words. It takes the first of these that applies and reads nothing else:
    a reference, a choice, a list of types, a constant, an enumeration, an object's properties, allOf,
    an array's items, a pattern, a format, a string's lengths, a bare type."""
    read, beside = _converter_branch(schema)
    return read, f"next to {beside}" if beside else "in a schema with no 'type'"


def _converter_branch(schema: dict) -> tuple[frozenset[str], str]:
    kind = schema.get("type")
    if "$ref" in schema:
        return frozenset({"$ref"}), "'$ref'"
    for choice in ("oneOf", "anyOf"):
        if choice in schema:
            return frozenset({choice}), repr(choice)
    if isinstance(kind, list):
        return frozenset({"type"}), "a list of types"
    for value in ("const", "enum"):
        if value in schema:
            return frozenset({value, "type"}), repr(value)
    if kind in (None, "object") and ("properties" in schema or schema.get("additionalProperties", True) is not True):
        return frozenset({"type", "properties", "required", "additionalProperties"}), "'properties'"
    if kind in (None, "object") and "allOf" in schema:
        return frozenset({"type", "allOf"}), "'allOf'"
    if kind in (None, "array") and ("items" in schema or "prefixItems" in schema):
        if isinstance(schema.get("items", []), list):  # a tuple: its items in order, no lengths
            return frozenset({"type", "items" if "items" in schema else "prefixItems"}), "a list of 'items'"
        return frozenset({"type", "items", "minItems", "maxItems"}), "'items'"
    if kind in (None, "string") and "pattern" in schema:
        return frozenset({"type", "pattern"}), "'pattern'"
    if kind in (None, "string") and "format" in schema:
        return frozenset({"type", "format"}), "'format'"
    if kind == "string":
        return frozenset({"type", "minLength", "maxLength"}), "'type': 'string'"
    return frozenset({"type"}), f"'type': {kind!r}" if kind else ""


# Keywords the converter reads somewhere: one found where it does not read it is refused "next to" the
# keyword that decided what it reads there.
_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "allOf", "anyOf", "oneOf", "const",
                    "enum", "items", "prefixItems", "pattern", "format", "$ref", *LENGTHS})


def _check_pattern(pattern: object, where: str) -> None:
    """A pattern the converter turns into a grammar that keeps the answer valid JSON: anchored, and
    written with plain characters, classes of them, groups, ``|`` and repetitions."""
    if not isinstance(pattern, str) or not (pattern.startswith("^") and pattern.endswith("$")) or len(pattern) < 2:
        raise _Refused(f"'pattern' at {where} must match the whole string: start it with ^ and end it with $")
    body = pattern[1:-1]
    for bad in ("[^", "(?"):
        if bad in body:
            raise _Refused(f"'pattern' at {where} holds {bad!r}, which Hearth cannot hold an answer to: {_UNSUPPORTED}")
    for char in body:
        if not (char.isalnum() or char in PATTERN_SYNTAX or char in PATTERN_PLAIN or ord(char) > 0x7F):
            raise _Refused(f"'pattern' at {where} holds {char!r}, which Hearth cannot hold an answer to (write "
                           "patterns with plain characters, [a-z] classes, ( | ), ?, *, + and {m,n}): "
                           f"{_UNSUPPORTED}")
    for members in _PATTERN_CLASS.findall(body):
        for low, high in zip(members, members[2:]):
            if members.find(f"{low}-{high}") >= 0 and (low <= '"' <= high or low <= "\\" <= high):
                raise _Refused(f"'pattern' at {where} holds the range '{low}-{high}', which takes in a quote or a "
                               "backslash (the answer's JSON could break there): list the characters you want instead")
    for counts in _PATTERN_COUNT.findall(body):
        numbers = [n.strip() for n in counts.split(",")]
        if not all(n.isdigit() or n == "" for n in numbers) or any(n and int(n) > MAX_REPEAT for n in numbers):
            raise _Refused(f"'pattern' at {where} repeats something {{{counts}}} times: write whole numbers up to "
                           f"{MAX_REPEAT}")


_PATTERN_CLASS = re.compile(r"\[([^\]]*)\]")
_PATTERN_COUNT = re.compile(r"\{([^}]*)\}")
