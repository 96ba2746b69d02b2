"""``--json-schema FILE`` on ``hearth generate`` and ``hearth send``: the real worker, SmolLM2.

The answer parses and matches the schema (checked by ``jsonschema``); a file that cannot be used is
one line naming it, before any model is loaded.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.helpers.cli import hearth

PLANET = {
    "type": "object",
    "properties": {"planet": {"enum": ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn"]},
                   "moons": {"type": "integer"}, "rocky": {"type": "boolean"}},
    "required": ["planet", "moons", "rocky"],
    "additionalProperties": False,
}
QUESTION = "Which planet do we live on, how many moons has it, and is it rocky?"


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "planet.json"
    path.write_text(json.dumps(PLANET))
    return path


def test_generate_answers_with_json_that_matches_the_schema(schema_file):
    done = hearth("generate", "--json-schema", str(schema_file), "--temperature", "0", "--max-tokens", "80",
                  "--json", QUESTION)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finish_reason"] == "stop", result["text"]
    jsonschema.validate(json.loads(result["text"]), PLANET)


def test_send_answers_in_a_saved_conversation_with_json_that_matches_the_schema(schema_file):
    done = hearth("send", "--new", "planets", "--json-schema", str(schema_file), "--temperature", "0.8",
                  "--seed", "3", "--max-tokens", "80", "--json", QUESTION)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(json.loads(result["text"]), PLANET)
    shown = hearth("conversations", "--json")
    assert shown.returncode == 0 and "planets" in shown.stdout


@pytest.mark.parametrize("content, words", [
    (None, "no such file"),
    ("{\"type\": \"object\",\n \"properties\": {", "not valid JSON (line 2"),
    ("[1, 2]", "a JSON schema is an object"),
    (json.dumps({"type": "integer", "minimum": 1}), "'minimum'"),
])
def test_a_schema_file_that_cannot_be_used_is_one_line_naming_it(tmp_path, content, words):
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    for command in (("generate",), ("send", "--new", "x")):
        done = hearth(*command, "--json-schema", str(path), "Hello")
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--json-schema {path}" in lines[0] and words in lines[0], done.stderr
        assert "Traceback" not in done.stderr
