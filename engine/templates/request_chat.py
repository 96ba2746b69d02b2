"""A request's messages and template settings as the chat template reads them."""

from __future__ import annotations

from engine import protocol as p
from engine.templates.chat_template import ChatMessage, RenderOptions


def chat_messages(messages: list[p.WireMessage]) -> list[ChatMessage]:
    return [ChatMessage(m.role, m.content, m.reasoning, tuple(m.tool_calls), m.tool_call_id) for m in messages]


def render_options(template: p.TemplateSpec) -> RenderOptions:
    """What the template may read besides the messages, as the request says."""
    return RenderOptions(template.now, template.enable_thinking, template.tools)
