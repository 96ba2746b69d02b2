"""Tools and calls as a chat template reads them: OpenAI's shapes, every piece of their text marked.

Templates read the offered tools as ``tools`` (``{"type": "function", "function": {"name",
"description", "parameters"}}``), an assistant message's calls as ``message.tool_calls`` (``{"id",
"type", "function": {"name", "arguments"}}``, the arguments a mapping, since Qwen3.5's template walks
them with ``|items``) and a tool's result as a ``tool`` message with ``tool_call_id``. All of that text
comes from a client or from the model, so every string in it enters marked
(:mod:`engine.templates.marked_text`): a function description holding ``<|im_start|>`` is data, never
a control token. ``tojson`` keeps what it writes marked (:func:`marked_json`).

A template that does not write ``message.tool_calls`` itself (LFM2.5's) gets the calls in the message's
content, in the form its model writes them (:func:`content_with_calls`): there only the form's own
markers (``<|tool_call_start|>``) are left unmarked, so they are read as the control tokens the model
wrote, and the rendering matches what the model read when it made the calls.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from engine.protocol.tools import ToolCall, ToolSpec
from engine.templates.marked_text import MarkedText, _plain
from engine.templates.tool_formats import ToolFormat, renders_calls, tool_format


def unmarked(value: Any) -> Any:
    """``value`` with every marked string plain again (for ``json.dumps``)."""
    if isinstance(value, dict):
        return {unmarked(k): unmarked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unmarked(v) for v in value]
    return str(_plain(value)) if isinstance(value, str) else value


def marked(value: Any) -> Any:
    """``value`` (JSON-like) with every string in it marked; keys stay plain (templates look them up)."""
    if isinstance(value, dict):
        return {str(k): marked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [marked(v) for v in value]
    return MarkedText(value) if isinstance(value, str) else value


def marked_json(value: Any, indent: int | None = None) -> MarkedText:
    """``tojson`` for templates: the JSON of ``value``, all of it marked (it only ever holds data)."""
    return MarkedText(json.dumps(unmarked(value), ensure_ascii=False, indent=indent))


def _schema(text: str) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def template_tools(tools: Sequence[ToolSpec]) -> list[dict]:
    return [{"type": "function", "function": marked({"name": t.name, "description": t.description,
                                                     "parameters": _schema(t.parameters) or {"type": "object",
                                                                                             "properties": {}}})}
            for t in tools]


def _arguments(text: str) -> Any:
    """A call's arguments as templates read them: the object, or the text where it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return MarkedText(text)
    return marked(value) if isinstance(value, dict) else MarkedText(text)


def template_calls(calls: Sequence[ToolCall]) -> list[dict]:
    return [{"id": MarkedText(c.id), "type": "function",
             "function": {"name": MarkedText(c.name), "arguments": _arguments(c.arguments)}} for c in calls]


@functools.lru_cache(maxsize=8)
def _form_of(template: str | None) -> tuple[ToolFormat | None, bool]:
    return tool_format(template), renders_calls(template)


def calls_go_in_content(template: str | None) -> ToolFormat | None:
    """The form to write calls in the content with, for a template that does not write them itself."""
    form, renders = _form_of(template)
    return None if renders else form


def content_with_calls(form: ToolFormat, content: str, calls: Sequence[ToolCall]) -> str:
    """``content`` then ``calls`` as the model writes them; marked but for the form's markers."""
    written = form.write(calls, content)
    pieces: list[str] = []
    rest = written
    while rest:
        at, marker = min(((rest.find(m), m) for m in form.markers if m and m in rest), default=(-1, ""))
        if at < 0:
            pieces.append(MarkedText(rest))
            break
        if at:
            pieces.append(MarkedText(rest[:at]))
        pieces.append(marker)
        rest = rest[at + len(marker):]
    return "".join(pieces)


def tool_chars(tools: Sequence[ToolSpec], calls: Sequence[ToolCall]) -> int:
    """How much text the tools and calls bring to a rendering (for its budget)."""
    return (sum(len(t.name) + len(t.description) + len(t.parameters) for t in tools)
            + sum(len(c.id) + len(c.name) + len(c.arguments) for c in calls))
