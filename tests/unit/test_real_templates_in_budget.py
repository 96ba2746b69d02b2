"""The budget that refuses template bombs (issue 32, point 14) leaves real chat templates alone: every
template llama.cpp vendors renders exactly as Jinja's own sandbox renders it, and the catalogue
families' templates take a long conversation with a 1 MB document without being refused."""

import tarfile

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.templates.chat_template import ChatMessage, ChatTemplateError, RenderOptions, _strftime_at, _tojson, render_chat
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


def jinja_render(template: str, messages: list[ChatMessage]) -> str:
    """What Jinja's immutable sandbox alone renders, with the globals Hearth gives templates."""
    def raise_exception(message):
        raise ChatTemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    items = [{"role": m.role, "content": m.content, **({"reasoning_content": m.reasoning} if m.reasoning else {})}
             for m in messages]
    return env.from_string(template).render(messages=items, add_generation_prompt=True, bos_token="<s>",
                                            eos_token="</s>", strftime_now=_strftime_at(0))


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


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_long_conversation_with_a_document_stays_within_budget(family):
    template = llama_sdist.template(FAMILIES[family].template)
    rendered = render_chat(template, LONG_CONVERSATION, bos_token="<s>", eos_token="</s>", options=RenderOptions(now=0))
    assert DOCUMENT.strip() in rendered.text and "question 19" in rendered.text
