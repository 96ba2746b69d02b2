"""Rendering a model's chat template (Jinja2, from its GGUF) into prompt text.

Templates come from downloaded files, so they run in Jinja2's immutable sandbox: they can format
messages but cannot touch Python objects or the file system. A template that fails raises
:class:`ChatTemplateError` with the reason instead of crashing the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Used when a model ships no template; ChatML is what llama.cpp falls back to as well.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

ROLES = ("system", "user", "assistant", "tool")


class ChatTemplateError(ValueError):
    """The chat template could not render these messages."""


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"the model's chat template refused the conversation: {message}")


def _make_environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_ENV = _make_environment()


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
) -> str:
    """The prompt text for ``messages`` (the caller tokenizes it with special tokens parsed)."""
    validate_messages(messages)
    source = template or CHATML_TEMPLATE
    context: dict[str, Any] = {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
    }
    try:
        return _ENV.from_string(source).render(**context)
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(
            f"the model's chat template could not be used ({type(exc).__name__}: {exc}); "
            "use raw mode or another model"
        ) from exc
    except Exception as exc:  # a template can raise anything from inside the sandbox
        raise ChatTemplateError(f"the model's chat template failed ({type(exc).__name__}: {exc})") from exc
