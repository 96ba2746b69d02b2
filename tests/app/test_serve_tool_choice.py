"""``tool_choice`` through the official ``openai`` client, and what a client or a model can get wrong.

``required`` and a named function hold decoding to one call in the family's form whose arguments match
the function's schema: checked on each family's real-template fixture, whose random weights would
otherwise never write a call, with ``jsonschema``. A model that writes something call-like that is not
a call (a function nobody offered, a call cut off by the token limit) gets a text answer, and a client
that sends what cannot be read gets a 400 naming the field; the server answers the next request.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from engine.protocol.tools import ToolCall
from engine.templates.tool_formats import tool_format
from tests.fixtures import llama_sdist
from tests.helpers.real_models import REAL_TINY, TEMPLATES, real_model
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                                            "days": {"type": "integer"}, "metric": {"type": "boolean"}},
           "required": ["city", "days"], "additionalProperties": False}
ALARM = {"type": "object", "properties": {"hour": {"type": "integer"}}, "required": ["hour"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather.", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.", "parameters": ALARM}}]
SCHEMAS = {"get_weather": WEATHER, "set_alarm": ALARM}
QUESTION = [{"role": "user", "content": "Weather in Paris for two days?"}]


def no_thinking(family: str) -> dict:
    """A forced call starts after the model's reasoning; a random-weight Qwen3.5 would reason without
    end, so it is asked not to (``chat_template_kwargs``, as llama.cpp's server takes it)."""
    return {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}} if family == "qwen35" else {}


@pytest.fixture(scope="module", params=sorted(REAL_TINY))
def family_server(request, tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp(f"serve-choice-{request.param}"), "--model",
                           str(real_model(REAL_TINY[request.param])))
    yield request.param, running
    running.stop()


@pytest.mark.parametrize("choice", ["required", "named"])
def test_a_forced_call_is_well_formed_and_matches_its_schema(family_server, choice):
    family, server = family_server
    client = server.client()
    model = client.models.list().data[0].id
    wanted = {"type": "function", "function": {"name": "set_alarm"}} if choice == "named" else "required"
    for seed in range(3):
        answer = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, tool_choice=wanted,
                                                temperature=0.8, seed=seed, max_tokens=200, **no_thinking(family))
        result = answer.choices[0]
        assert result.finish_reason == "tool_calls", (family, seed, result.message.content)
        [call] = result.message.tool_calls
        assert choice != "named" or call.function.name == "set_alarm"
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_tool_choice_none_answers_in_text_after_a_forced_call(family_server):
    family, server = family_server
    client = server.client()
    model = client.models.list().data[0].id
    first = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, tool_choice="required",
                                           temperature=0, max_tokens=200, **no_thinking(family))
    call = first.choices[0].message.tool_calls[0]
    history = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
               {"role": "tool", "tool_call_id": call.id, "content": "done"}]
    second = client.chat.completions.create(model=model, messages=history, tools=TOOLS, tool_choice="none",
                                            temperature=0, max_tokens=12)
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].finish_reason in ("stop", "length")


# --- what a client or a model gets wrong -----------------------------------------------------------------


@pytest.fixture(scope="module")
def scripted_server(tmp_path_factory):
    """Qwen3.5's fixture, whose answers write a call to a function nobody offered, then one cut off."""
    home = tmp_path_factory.mktemp("serve-tool-mistakes")
    form = tool_format(llama_sdist.template(TEMPLATES["qwen35"]))
    unknown = form.write([ToolCall("c", "get_stock", '{"ticker": "ACME"}')], "")
    cut = form.write([ToolCall("c", "get_weather", '{"city": "Paris", "days": 2}')], "Let me look.")
    (home / "script.json").write_text(json.dumps([f"\n</think>\n\n{unknown}", f"\n</think>\n\n{cut}"]))
    running = start_server(home, "--model", str(real_model(REAL_TINY["qwen35"])),
                           HEARTH_TEST_SCRIPTED_ANSWERS=str(home / "script.json"))
    yield running, unknown
    running.stop()


def test_a_call_to_a_function_not_offered_and_a_cut_off_call_are_text_answers(scripted_server):
    server, unknown = scripted_server
    client = server.client()
    model = client.models.list().data[0].id
    first = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, max_tokens=200)
    assert (first.choices[0].finish_reason, first.choices[0].message.tool_calls) == ("stop", None)
    assert first.choices[0].message.content == unknown
    second = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, max_tokens=20)
    assert (second.choices[0].finish_reason, second.choices[0].message.tool_calls) == ("length", None)
    assert second.choices[0].message.content.startswith("Let me look.\n\n<tool_call>")


BAD_REQUESTS = {
    "a result for no call": ([*QUESTION, {"role": "tool", "tool_call_id": "call_x", "content": "?"}], {},
                             "messages[1].tool_call_id"),
    "a call without an id": ([*QUESTION, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "user", "content": "?"}], {}, "messages[1].tool_calls[0]"),
    "arguments that are not JSON": ([*QUESTION, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{city"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "?"}], {}, "messages[1].tool_calls[0].function.arguments"),
    "a named function not offered": (QUESTION, {"tool_choice": {"type": "function", "function": {"name": "nope"}}},
                                     "tool_choice"),
    "a tool with a bad name": (QUESTION, {"tools": [{"type": "function", "function": {"name": "a b"}}]},
                               "tools[0].function"),
    "a forced call whose schema cannot be held": (QUESTION, {"tool_choice": "required", "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}}]},
        "tools[0].function.parameters"),
    "the old functions field": (QUESTION, {"functions": [{"name": "f"}]}, "functions"),
}


@pytest.mark.parametrize("messages, extra, param", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_what_cannot_be_read_is_a_400_naming_the_field(scripted_server, messages, extra, param):
    server, _ = scripted_server
    client = server.client()
    model = client.models.list().data[0].id
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=model, messages=messages, max_tokens=4, **{"tools": TOOLS, **extra})
    assert refused.value.body["param"] == param, refused.value.body
    answer = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert answer.choices[0].finish_reason in ("stop", "length")
