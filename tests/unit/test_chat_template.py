import pytest
from jinja2.exceptions import SecurityError

from engine.templates.chat_template import CHATML_TEMPLATE, ChatMessage, ChatTemplateError, render_chat


def test_chatml_renders_messages_and_generation_prompt():
    text = render_chat(CHATML_TEMPLATE, [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]).text
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_missing_template_falls_back_to_chatml():
    assert render_chat(None, [ChatMessage("user", "x")]) == render_chat(CHATML_TEMPLATE, [ChatMessage("user", "x")])


def test_syntax_error_is_a_clear_error():
    with pytest.raises(ChatTemplateError, match="could not be used"):
        render_chat("{% for m in messages %}", [ChatMessage("user", "x")])


def test_template_raise_exception_is_reported():
    template = "{{ raise_exception('roles must alternate') }}"
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        render_chat(template, [ChatMessage("user", "x")])


def test_sandbox_blocks_python_internals():
    template = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ChatTemplateError, match=r"^the chat template of 'evil.gguf' was refused: .*access to attribute "
                                                r"'__class__' of 'list' object is unsafe\); use a model with a standard "
                                                r"chat template, or raw mode$") as refused:
        render_chat(template, [ChatMessage("user", "x")], model_name="'evil.gguf'")
    assert isinstance(refused.value.__cause__, SecurityError), "the sandbox refused it, not some later failure"
    assert "SecurityError" not in str(refused.value)  # the one-line refusal, not the exception's raw text


def test_unknown_role_and_empty_conversation_are_refused():
    with pytest.raises(ChatTemplateError, match="role"):
        render_chat(CHATML_TEMPLATE, [ChatMessage("robot", "x")])
    with pytest.raises(ChatTemplateError, match="no messages"):
        render_chat(CHATML_TEMPLATE, [])


def test_a_template_writes_the_date_of_its_conversations_clock_not_today():
    template = "{{ strftime_now('%d %b %Y') }}|{% for m in messages %}{{ m['content'] }}{% endfor %}"
    from datetime import datetime

    from engine.templates.chat_template import RenderOptions

    started = datetime(2025, 7, 26, 12, 0).timestamp()
    text = render_chat(template, [ChatMessage("user", "Hi")], options=RenderOptions(now=started)).text
    assert text == "26 Jul 2025|Hi"
    assert render_chat(template, [ChatMessage("user", "Hi")]).text.startswith(datetime.now().strftime("%d %b %Y"))
