"""Function calls through the official ``openai`` client: real ``hearth serve``, real worker, each catalogue
family's real-template fixture.

A random-weight model never decides to call a tool, so its answers are scripted
(``HEARTH_TEST_SCRIPTED_ANSWERS``, engine.decoding.scripted): each answer's tokens are what that
family's model writes for the call (its form: engine.templates.tool_formats), forced token by token
while the model reads every prompt and decodes every token as usual. Everything after the choice is
real: the template writing the tools and the history's calls and results, the worker reading the calls
back out of the answer, the API's ``tool_calls`` whole and streamed, the conversation stored and
continued from saved state. Three rounds: two calls, each with its result, then the answer.
"""

from __future__ import annotations

import json

import pytest

from engine.protocol.tools import ToolCall
from engine.templates.tool_formats import tool_format
from tests.fixtures import llama_sdist
from tests.helpers.real_models import REAL_TINY, TEMPLATES, real_model
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city for the next days.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city", "days"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time now in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}},
]
CALLS = [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {"zone": "Europe/Paris"})]
RESULTS = ["Sunny, 21 °C, light wind.", "12:00"]
ANSWER = "It is sunny in Paris and it is noon there."


def scripted_answers(family: str) -> list[str]:
    """What the family's model writes in each round: two calls, then the answer (Qwen3.5's prompt opens
    a reasoning block, which the answer closes first)."""
    form = tool_format(llama_sdist.template(TEMPLATES[family]))
    lead = "\n</think>\n\n" if family == "qwen35" else ""
    calls = [form.write([ToolCall("call", name, json.dumps(args))], "") for name, args in CALLS]
    return [lead + text for text in (*calls, ANSWER)]


@pytest.fixture(scope="module", params=sorted(REAL_TINY))
def family_server(request, tmp_path_factory):
    family = request.param
    home = tmp_path_factory.mktemp(f"serve-tools-{family}")
    script = home / "script.json"
    script.write_text(json.dumps(scripted_answers(family) * 2))  # the whole conversation, then the streamed one
    running = start_server(home, "--model", str(real_model(REAL_TINY[family])),
                           HEARTH_TEST_SCRIPTED_ANSWERS=str(script))
    yield family, running
    running.stop()


def _whole(client, model, messages):
    answer = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=120,
                                            temperature=0)
    choice = answer.choices[0]
    calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    usage = answer.usage
    return choice.finish_reason, choice.message.content, calls, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens


def _streamed(client, model, messages):
    stream = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=120,
                                            temperature=0, stream=True, stream_options={"include_usage": True})
    text, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            text += delta.content or ""
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += part.id or ""
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
            finish = choice.finish_reason or finish
    ordered = [(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    return finish, text or None, ordered, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens


@pytest.mark.parametrize("ask", [_whole, _streamed], ids=["whole", "streamed"])
def test_a_three_round_tool_conversation_completes(family_server, ask):
    family, server = family_server
    client = server.client()
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": f"What is the weather and the time in Paris? ({ask.__name__})"}]
    read = []
    for round_, (name, args) in enumerate(CALLS):
        finish, content, calls, prompt, cached = ask(client, model, messages)
        read.append((prompt, prompt - cached))
        assert finish == "tool_calls", (family, round_, content)
        assert [(n, json.loads(a)) for _, n, a in calls] == [(name, args)]
        call_id = calls[0][0]
        assert call_id.startswith("call_")
        messages.append({"role": "assistant", "content": content, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": calls[0][2]}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": RESULTS[round_]})
    finish, content, calls, prompt, cached = ask(client, model, messages)
    read.append((prompt, prompt - cached))
    assert (finish, content, calls) == ("stop", ANSWER, [])
    print(f"\n{family} {ask.__name__}: (prompt tokens, read) per round {read}")
    # each later round stands on the state saved where the answer ended: it reads the tool's result and
    # the framing around it, fewer tokens than the answer and the result together
    assert all(new < whole - before for (before, _), (whole, new) in zip(read, read[1:])), read
