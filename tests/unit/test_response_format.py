"""The API's ``response_format`` as the engine's constraint, and what is refused by name."""

from __future__ import annotations

import json

import pytest

from app.surfaces.serve.response_format import output_constraint
from app.surfaces.serve.schema import RequestRefused
from tests.app.test_serve_response_format import CITY, schema_format


def test_the_three_openai_forms_become_the_engines_constraint():
    assert output_constraint(None) is None and output_constraint({"type": "text"}) is None
    assert output_constraint({"type": "json_object"}).kind == "json"
    constraint = output_constraint(schema_format())
    assert constraint.kind == "json_schema" and constraint.name == "city" and json.loads(constraint.schema) == CITY


@pytest.mark.parametrize("given, words", [
    ({"type": "yaml"}, "type \"yaml\" is not supported"),
    ({"type": "json_schema"}, "needs a 'json_schema' object"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}, "must be a JSON schema"),
    (schema_format({"type": "integer", "minimum": 3}), "minimum"),
])
def test_what_cannot_be_held_is_refused_by_name(given, words):
    with pytest.raises(RequestRefused) as refused:
        output_constraint(given)
    assert refused.value.param == "response_format" and words in str(refused.value)
