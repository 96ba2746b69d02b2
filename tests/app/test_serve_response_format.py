"""``response_format`` through the official ``openai`` client: real ``hearth serve``, real worker, SmolLM2.

The answers must parse and match the schema every time (checked by ``jsonschema``, the reference
validator), whole and streamed; what Hearth cannot hold an answer to is a 400 naming it.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
MODEL = "default"
CITY = {  # every answer it allows is short: the strings and the number are bounded
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "country": {"type": "string", "maxLength": 24},
                   "population": {"type": "integer"}, "coastal": {"type": "boolean"}},
    "required": ["city", "country", "population", "coastal"],
    "additionalProperties": False,
}
QUESTION = [{"role": "user", "content": "Name a large city, its country, its population and whether it is on the coast."}]


def schema_format(schema: dict = CITY, name: str = "city") -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-home"))
    yield running
    running.stop()


def test_twenty_sampled_answers_all_parse_and_match_the_schema(server):
    client = server.client()
    for seed in range(20):
        answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0.8, seed=seed,
                                                max_tokens=200, response_format=schema_format())
        choice = answer.choices[0]
        assert choice.finish_reason == "stop", (seed, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), CITY)


def test_a_streamed_json_object_answer_parses_and_equals_the_whole_one(server):
    client = server.client()
    options = dict(model=MODEL, messages=QUESTION, temperature=0, max_tokens=200,
                   response_format={"type": "json_object"})
    whole = client.chat.completions.create(**options).choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **options)
                       if c.choices)
    assert streamed == whole and isinstance(json.loads(whole), dict)


def test_a_schema_keyword_hearth_cannot_hold_is_a_400_and_the_server_goes_on(server):
    client = server.client()
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=20,
                                       response_format=schema_format({"type": "integer", "maximum": 9}))
    assert "maximum" in str(refused.value) and refused.value.body["param"] == "response_format"
    again = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8, temperature=0)
    assert again.choices[0].message.content
