"""A forced call (``tool_choice`` required or named) under drafting: greedy answers with a draft model equal
plain ones token for token, and every answer is one call in the family's form that its parser reads back,
with arguments that match the function's schema (issue 54). On the real-template fixtures that draft
(Granite 4.0 H never drafts: its state cannot roll back), through the worker's own pieces: the template
writes the tools, the form's grammar holds the answer (its markers allowed though they are control
tokens), and the call splitter reads it.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from engine import protocol as p
from engine.decoding.generation import Generation, GenerationSettings
from engine.decoding.sampling import GREEDY
from engine.decoding.tool_use import forced_call, tool_use_for
from engine.models.session import open_session
from engine.protocol.draft_choice import parse_draft_spec
from engine.speculative.drafting import Drafting
from engine.templates.chat_template import ChatMessage, RenderOptions
from engine.templates.prompts import chat_prompt
from tests.helpers.real_models import REAL_TINY, real_model

pytestmark = pytest.mark.slow

WEATHER = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]}, "days": {"type": "integer"},
                                            "metric": {"type": "boolean"}}, "required": ["city", "days"]}
ALARM = {"type": "object", "properties": {"hour": {"type": "integer"}}, "required": ["hour"]}
TOOLS = (p.ToolSpec("get_weather", "The weather in a city.", json.dumps(WEATHER)),
         p.ToolSpec("set_alarm", "Set an alarm.", json.dumps(ALARM)))
SCHEMAS = {"get_weather": WEATHER, "set_alarm": ALARM}
CHOICES = {"required": p.ToolChoice(mode="required"), "named": p.ToolChoice(mode="named", name="set_alarm")}


@pytest.fixture(scope="module", params=[family for family in sorted(REAL_TINY) if family != "granite"])
def session(request):
    path = real_model(REAL_TINY[request.param])
    opened = open_session(str(path), n_ctx=1024, draft_max=4)
    yield request.param, path, opened
    opened.close()


def forced_answer(session, question: str, choice: p.ToolChoice, make_source=None) -> Generation:
    options = RenderOptions(enable_thinking=False, tools=TOOLS)
    tokens, reasoning = chat_prompt(session.model, [ChatMessage("user", question)], options)
    use = tool_use_for(session, TOOLS, choice)
    constraint = forced_call(session, use, choice, reasoning)
    settings = GenerationSettings(GREEDY, max_tokens=120, reasoning=reasoning, constraint=constraint, tools=use)
    run = Generation(session, tokens, settings, make_source=make_source)
    list(run)
    return run


@pytest.mark.parametrize("kind", sorted(CHOICES))
def test_a_forced_call_with_drafting_equals_plain_and_reads_back_as_one_valid_call(session, kind):
    family, path, opened = session
    drafting = Drafting(opened)
    make, _ = drafting.plan(parse_draft_spec(f"model:{path}"), 4, auto_off=False)
    try:
        for question in ("Weather in Paris?", "Wake me at seven.", "Anything."):
            plain = forced_answer(opened, question, CHOICES[kind])
            drafted = forced_answer(opened, question, CHOICES[kind], make)
            assert drafted.token_ids == plain.token_ids, (family, question)
            assert plain.finish_reason == "stop" and plain.tool_problem == "", (family, plain.text, plain.tool_problem)
            [call] = plain.tool_calls
            assert kind != "named" or call.name == "set_alarm"
            jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
            assert [(c.name, c.arguments) for c in drafted.tool_calls] == [(call.name, call.arguments)]
    finally:
        drafting.close()
