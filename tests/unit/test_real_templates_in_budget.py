"""The budget that refuses template bombs (issue 32, point 14) leaves real chat templates alone: every
template llama.cpp vendors renders exactly as Jinja's own sandbox renders it, and the catalogue
families' templates take a long conversation with a 1 MB document without being refused."""

import json
import tarfile

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.protocol.tools import ToolCall, ToolSpec
from engine.templates.tool_messages import calls_go_in_content
from engine.templates.chat_template import ChatMessage, ChatTemplateError, RenderOptions, _strftime_at, render_chat
from tests.fixtures import llama_sdist
from tests.fixtures.real_families import FAMILIES

CONVERSATION = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello"),
                ChatMessage("assistant", "Hi! How can I help?", reasoning="A greeting."),
                ChatMessage("user", "Tell me a story about {{ braces }} and <|im_start|> tokens.")]
DOCUMENT = "The quick brown fox jumps over the lazy dog. " * 25_000  # 1.1 MB
LONG_CONVERSATION = [ChatMessage("system", "Be brief."),
                     *(message for turn in range(20) for message in (
                         ChatMessage("user", f"question {turn} " * 50),
                         ChatMessage("assistant", f"answer {turn} " * 200, reasoning="thinking " * 30))),
                     ChatMessage("user", "Summarise this:\n" + DOCUMENT)]


def vendored_templates() -> list[str]:
    with tarfile.open(llama_sdist.sdist_path()) as archive:
        return sorted(member.name.rsplit("/", 1)[1] for member in archive.getmembers()
                      if f"/{llama_sdist.TEMPLATES}/" in member.name and member.name.endswith(".jinja"))


def jinja_render(template: str, messages: list[ChatMessage], tools: list[dict] | None = None) -> str:
    """What Jinja's immutable sandbox alone renders, with the globals Hearth gives templates."""
    def raise_exception(message):
        raise ChatTemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    items = [_item(m) for m in messages]
    extra = {"tools": tools} if tools else {}
    return env.from_string(template).render(messages=items, add_generation_prompt=True, bos_token="<s>",
                                            eos_token="</s>", strftime_now=_strftime_at(0), **extra)


def _item(m: ChatMessage) -> dict:
    item = {"role": m.role, "content": m.content, **({"reasoning_content": m.reasoning} if m.reasoning else {})}
    if m.tool_calls:
        item["tool_calls"] = [{"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": json.loads(c.arguments)}} for c in m.tool_calls]
    if m.tool_call_id:
        item["tool_call_id"] = m.tool_call_id
    return item


def test_every_vendored_template_renders_as_jinja_renders_it():
    names = vendored_templates()
    assert len(names) >= 40
    compared = 0
    for name in names:
        template = llama_sdist.template(name)
        try:
            expected = jinja_render(template, CONVERSATION)
        except Exception:  # noqa: BLE001 (a tag Jinja lacks, a conversation the template refuses)
            continue
        rendered = render_chat(template, CONVERSATION, bos_token="<s>", eos_token="</s>", options=RenderOptions(now=0))
        assert rendered.text == expected, name
        compared += 1
    assert compared >= 40


TOOL = ToolSpec("get_weather", "The weather <|im_start|> in a city.",
                json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
TOOL_CONVERSATION = [ChatMessage("system", "You are helpful."), ChatMessage("user", "Weather in Paris?"),
                     ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
                     ChatMessage("tool", "Sunny, 21 °C", tool_call_id="call_1"), ChatMessage("user", "Thanks! And Rome?")]


def test_every_vendored_template_renders_tools_and_calls_as_jinja_renders_them():
    """The tools, an answer's calls and a tool's result reach each template in OpenAI's shapes (their
    text marked, which changes nothing rendered); a template that does not write ``tool_calls`` itself
    gets them in the content (engine.templates.tool_messages), so it is not compared here."""
    compared = 0
    tools = [{"type": "function", "function": {"name": TOOL.name, "description": TOOL.description,
                                               "parameters": json.loads(TOOL.parameters)}}]
    for name in vendored_templates():
        template = llama_sdist.template(name)
        if calls_go_in_content(template) is not None:
            continue
        try:
            expected = jinja_render(template, TOOL_CONVERSATION, tools)
        except Exception:  # noqa: BLE001 (a tag Jinja lacks, a conversation the template refuses)
            continue
        rendered = render_chat(template, TOOL_CONVERSATION, bos_token="<s>", eos_token="</s>",
                               options=RenderOptions(now=0, tools=(TOOL,)))
        assert rendered.text == expected, name
        if TOOL.description in expected:  # the description is data: read as plain text, never a control token
            at = rendered.text.index(TOOL.description)
            assert any(a <= at and at + len(TOOL.description) <= b for a, b in rendered.content_spans), name
        compared += 1
    assert compared >= 30


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_long_conversation_with_a_document_stays_within_budget(family):
    template = llama_sdist.template(FAMILIES[family].template)
    rendered = render_chat(template, LONG_CONVERSATION, bos_token="<s>", eos_token="</s>", options=RenderOptions(now=0))
    assert DOCUMENT.strip() in rendered.text and "question 19" in rendered.text
