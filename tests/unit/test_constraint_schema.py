"""An answer's constraint on the wire (protocol 16) and the schema check both sides run
(engine.protocol.constraint): what is refused is refused by name and place, in words a user can act on."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from engine import protocol as p
from engine.protocol.constraint import MAX_REPEAT, bare_schema

FINITE = {"type": "object", "properties": {
    "colour": {"enum": ["red", "green", "blue"]},
    "count": {"type": "integer"},
    "label": {"type": "string", "maxLength": 24, "description": "a short label"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
}, "required": ["colour", "count", "label", "tags"], "title": "Thing"}


@pytest.mark.parametrize("constraint", [
    p.OutputConstraint(kind="json"),
    p.constraint_from_schema_text(json.dumps(FINITE), name="thing"),
    p.OutputConstraint(kind="grammar", grammar='root ::= "yes" | "no"'),
])
@pytest.mark.parametrize("command", [
    lambda c: p.Complete(request_id="r", prompt="x", constraint=c),
    lambda c: p.Chat(request_id="r", messages=[p.WireMessage("user", "hi")], constraint=c),
    lambda c: p.AnswerTurn(request_id="r", conversation_id="c", answer_id="a", messages=[], constraint=c),
])
def test_every_answer_carries_its_constraint_across_the_pipe(constraint, command):
    sent = command(constraint)
    assert p.decode_command(p.encode(sent)) == sent
    assert p.decode_command(p.encode(command(None))).constraint is None


def test_the_protocol_version_says_the_constraint_is_there():
    assert p.PROTOCOL_VERSION >= 16
    assert "constraint" in p.Complete.__struct_fields__


def test_a_schema_too_long_for_the_wire_is_refused_when_decoded():
    raw = msgspec.to_builtins(p.Complete(request_id="r", prompt="x", constraint=p.OutputConstraint(kind="json")))
    raw["constraint"]["schema"] = "x" * (p.MAX_SCHEMA_BYTES + 1)
    with pytest.raises(msgspec.ValidationError):
        p.decode_command(msgspec.msgpack.encode(raw))
    raw["constraint"] = {"kind": "regex"}
    with pytest.raises(msgspec.ValidationError):
        p.decode_command(msgspec.msgpack.encode(raw))


def test_schema_text_is_read_with_the_place_of_its_mistake():
    with pytest.raises(ValueError, match=r"^not valid JSON \(line 3, column 5: Expecting ',' delimiter\)$"):
        p.constraint_from_schema_text('{\n  "type": "object"\n    "properties": {}\n}')
    with pytest.raises(ValueError, match="a JSON schema is an object, got a list"):
        p.constraint_from_schema_text("[1, 2]")
    with pytest.raises(ValueError, match="KiB"):
        p.constraint_from_schema_text(json.dumps({"enum": ["x" * p.MAX_SCHEMA_BYTES]}))
    with pytest.raises(ValueError, match="name"):
        p.constraint_from_schema_text("{}", name="n" * 65)
    made = p.constraint_from_schema_text(json.dumps(FINITE), name="thing")
    assert made == p.OutputConstraint(kind="json_schema", schema=json.dumps(FINITE), name="thing")


@pytest.mark.parametrize("schema, words", [
    ({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}},
     "'minimum' at properties.age is not supported: Hearth cannot hold the model to it; remove it and check the "
     "value in your program"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "'uniqueItems' at the top level"),
    ({"type": ["string", "null"], "maxLength": 4},
     "'maxLength' at the top level is not supported next to a list of types"),
    ({"type": "array", "maxItems": 3}, "'maxItems' at the top level is not supported next to 'type': 'array'"),
    ({"anyOf": [{"type": "string"}], "type": "string"}, "'type' at the top level is not supported next to 'anyOf'"),
    ({"$ref": "#/$defs/A", "$defs": {"A": {"type": "string"}}, "type": "string"}, "next to '$ref'"),
    ({"$ref": "https://example.com/s.json"}, "Hearth never fetches schemas"),
    ({"$ref": "#/$defs/Missing"}, "which this schema does not have"),
    ({"type": "string", "format": "email"}, "'format': 'email' at the top level is not supported"),
    ({"type": "string", "pattern": "[a-z]+"}, "start it with ^ and end it with $"),
    ({"type": "string", "pattern": "^\\d+$"}, "holds '\\\\'"),
    ({"type": "string", "pattern": "^[ -~]+$"}, "takes in a quote or a backslash"),
    ({"type": "string", "pattern": "^[^,]+$"}, "holds '[^'"),
    ({"type": "string", "maxLength": MAX_REPEAT + 1}, f"from 0 to {MAX_REPEAT}"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "no value can match"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "names 'b', which is not among its 'properties'"),
    ({"type": "strnig"}, "'type' at the top level must be one of"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"not": {}}}}}},
     "'not' at properties.a.properties.b"),
    ({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number", "multipleOf": 2}}}},
     "'multipleOf' at properties.xs.items"),
    ({"anyOf": [{"type": "integer", "maximum": 3}]}, "'maximum' at anyOf[0]"),
    ({"allOf": [{"type": "object", "properties": {"a": {}}, "additionalProperties": False}, {"properties": {}}]},
     "'allOf' at the top level may only join"),
])
def test_what_the_converter_would_pass_over_is_refused_by_name_and_place(schema, words):
    problem = p.schema_problem(schema)
    assert problem is not None and words in problem, problem
    with pytest.raises(ValueError, match="^" + re.escape(problem) + "$"):
        p.constraint_from_schema_text(json.dumps(schema))


def test_a_schema_nested_too_deeply_is_refused():
    schema: dict = {"type": "string"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    assert "nested too deeply" in p.schema_problem(schema)


@pytest.mark.parametrize("schema", [
    FINITE,
    {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Optional"},
    {"$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
     "type": "object", "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/P"}, "minItems": 1}}},
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
    {"type": "string", "format": "date-time"},
    {"allOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
    {"oneOf": [{"const": 1}, {"const": "one"}], "discriminator": {"propertyName": "x"}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {},
])
def test_schemas_a_program_commonly_sends_are_taken(schema):
    assert p.schema_problem(schema) is None


def test_annotations_are_dropped_but_properties_named_like_them_are_kept():
    schema = {"title": "T", "type": "object", "description": "d", "properties": {
        "title": {"type": "string", "examples": ["x"]}, "default": {"type": "integer", "default": 3}}}
    assert bare_schema(json.dumps(schema)) == {"type": "object", "properties": {
        "title": {"type": "string"}, "default": {"type": "integer"}}}
