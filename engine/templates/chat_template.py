"""Rendering a model's chat template (Jinja2, from its GGUF) into prompt text.

Templates come from downloaded files, so they run in Jinja2's immutable sandbox (they can format
messages but cannot touch Python objects or the file system) and within a time and size budget
(:mod:`engine.templates.template_budget`, :mod:`engine.templates.template_sandbox`). The messages' text enters the template marked
(:mod:`engine.templates.marked_text`), so the result knows which characters came from the messages: those
are tokenized as plain text and can never become control tokens. A template that fails or goes
over budget raises :class:`ChatTemplateError` with the reason instead of crashing the worker.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Callable
from typing import Any

import jinja2
from jinja2.sandbox import SecurityError

from engine.protocol.tools import ToolCall, ToolSpec
from engine.templates.marked_text import MarkedText, Span, take_spans
from engine.templates.tool_messages import (calls_go_in_content, content_with_calls, marked_json, template_calls,
                                            template_tools, tool_chars)
from engine.templates.template_budget import Budget, TemplateBudgetError, budget_in_force, collect_output
from engine.templates.template_sandbox import BudgetedSandbox

# Used when a model ships no template; ChatML is what llama.cpp falls back to as well.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

ROLES = ("system", "user", "assistant", "tool")
MAX_STRFTIME_FORMAT = 200  # characters of a date format a template may ask for
WHAT_TO_DO = "Use a model with a standard chat template, or raw mode"  # after a template is refused


class ChatTemplateError(ValueError):
    """The chat template could not render these messages."""


class ChatTemplateTooCostly(ChatTemplateError):
    """The chat template went over its time or size budget: the model cannot be used for chat."""

    def __init__(self, model_name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the chat template of {model_name} is too costly to run ({reason}); Hearth refused it "
                         f"to keep the app responsive. {WHAT_TO_DO}")


class ChatTemplateUnsafe(ChatTemplateError):
    """The chat template reached for what the sandbox keeps from templates (Python internals)."""

    def __init__(self, model_name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the chat template of {model_name} was refused: it tried what a chat template may not do "
                         f"({reason}); {WHAT_TO_DO[0].lower()}{WHAT_TO_DO[1:]}")


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str
    reasoning: str = ""  # an answer's reasoning, kept apart from it; templates read it as ``reasoning_content``
    tool_calls: tuple[ToolCall, ...] = ()  # the calls an answer made (engine.templates.tool_messages)
    tool_call_id: str = ""  # the call a ``tool`` message answers


@dataclass(frozen=True)
class RenderOptions:
    """What a template may read besides the messages. ``now`` is the clock a template's
    ``strftime_now`` sees (seconds since the epoch; None: the real clock): a conversation fixes it, so
    a template that writes today's date renders its history the same on every later day.
    ``enable_thinking`` is passed only when set: None leaves the template's own default."""

    now: float | None = None
    enable_thinking: bool | None = None
    tools: tuple[ToolSpec, ...] = ()  # the functions the model is told it may call (``tools``)


@dataclass(frozen=True)
class RenderedChat:
    """A rendered prompt, and where in it the messages' own text is (read as plain text)."""

    text: str
    content_spans: tuple[Span, ...] = ()

    def prefix(self, end: int) -> RenderedChat:
        """The prompt up to character ``end``, its spans cut there."""
        spans = tuple((a, min(b, end)) for a, b in self.content_spans if a < end)
        return RenderedChat(self.text[:end], spans)

    def suffix(self, start: int) -> RenderedChat:
        """The prompt from character ``start`` on, with its spans moved along."""
        spans = tuple((max(a, start) - start, b - start) for a, b in self.content_spans if b > start)
        return RenderedChat(self.text[start:], spans)


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"the model's chat template refused the conversation: {message}")


def _moment(now: float | None) -> datetime:
    """The local time at ``now`` (the real clock for None, or past what this system's clock can show)."""
    try:
        return datetime.now() if now is None else datetime.fromtimestamp(now)
    except (OverflowError, ValueError, OSError):
        return datetime.now()


def _strftime_at(now: float | None) -> Callable[[str], str]:
    def strftime_now(fmt: str) -> str:
        if len(str(fmt)) > MAX_STRFTIME_FORMAT:
            raise TemplateBudgetError(f"strftime_now was given a {len(str(fmt)):,}-character format")
        return _moment(now).strftime(str(fmt))

    return strftime_now


def _make_environment() -> BudgetedSandbox:
    env = BudgetedSandbox(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
    env.add_filter("tojson", marked_json)
    env.globals["raise_exception"] = _raise_exception
    return env


_ENV = _make_environment()


@functools.lru_cache(maxsize=8)
def _compiled(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def _message_for_template(message: ChatMessage, template: str | None) -> dict[str, Any]:
    """A message as templates read it; reasoning only where there is some (a template tests whether
    ``reasoning_content`` is a string to decide whether to split it out of the content itself); calls
    in the content for a template that does not write ``tool_calls`` itself."""
    content: str = MarkedText(message.content)
    item: dict[str, Any] = {"role": message.role}
    if message.reasoning:
        item["reasoning_content"] = MarkedText(message.reasoning)
    if message.tool_calls:
        form = calls_go_in_content(template)
        if form is not None:
            content = content_with_calls(form, message.content, message.tool_calls)
        else:
            item["tool_calls"] = template_calls(message.tool_calls)
    if message.tool_call_id:
        item["tool_call_id"] = MarkedText(message.tool_call_id)
    item["content"] = content
    return item


def validate_messages(messages: list[ChatMessage]) -> None:
    if not messages:
        raise ChatTemplateError("there are no messages to send")
    for index, message in enumerate(messages):
        if message.role not in ROLES:
            raise ChatTemplateError(f"message {index} has role {message.role!r}; use one of {', '.join(ROLES)}")


def render_chat(
    template: str | None,
    messages: list[ChatMessage],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    model_name: str = "this model",
    options: RenderOptions = RenderOptions(),
) -> RenderedChat:
    """The prompt for ``messages``, with the spans of the messages' text (see :class:`RenderedChat`)."""
    validate_messages(messages)
    calls = [c for m in messages for c in m.tool_calls]
    budget = Budget.for_messages(sum(len(m.content) + len(m.reasoning) for m in messages)
                                 + tool_chars(options.tools, calls))
    context: dict[str, Any] = {
        "messages": [_message_for_template(m, template) for m in messages],
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "strftime_now": _strftime_at(options.now),
    }
    if options.enable_thinking is not None:
        context["enable_thinking"] = options.enable_thinking
    if options.tools:
        context["tools"] = template_tools(options.tools)
    try:
        with budget_in_force(budget):
            marked = collect_output(_compiled(template or CHATML_TEMPLATE).generate(**context), budget)
    except ChatTemplateError:
        raise
    except TemplateBudgetError as exc:
        raise ChatTemplateTooCostly(model_name, str(exc)) from exc
    except RecursionError as exc:
        raise ChatTemplateTooCostly(model_name, "it calls itself without end") from exc
    except SecurityError as exc:
        raise ChatTemplateUnsafe(model_name, str(exc).rstrip(".")) from exc
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(
            f"the chat template of {model_name} could not be used ({type(exc).__name__}: {exc}); "
            "use raw mode or another model"
        ) from exc
    except Exception as exc:  # a template can raise anything from inside the sandbox
        raise ChatTemplateError(f"the chat template of {model_name} failed ({type(exc).__name__}: {exc})") from exc
    text, spans = take_spans(marked)
    return RenderedChat(text, spans)
