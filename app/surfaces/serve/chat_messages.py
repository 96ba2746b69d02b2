"""A chat request's messages as Hearth stores them: roles, text, reasoning, and the tool part.

``developer`` is the system role of newer OpenAI models. An assistant message may carry the calls
it made (``tool_calls``: ``{"id", "type": "function", "function": {"name", "arguments"}}``, the
arguments as JSON text, as OpenAI sends them back), and a ``tool`` message gives one call's result
(``tool_call_id``). What a client sends is checked here: a call without an id or a name, arguments
that are not a JSON object, a ``tool`` message without the id of a call made earlier in the
conversation are each refused with a 400 naming the message.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from app.surfaces.serve.schema import ChatMessageIn, ChatRequest, RequestRefused, TextPart
from engine import protocol as p
from engine.protocol.tools import MAX_CALLS

ROLES = ("system", "developer", "user", "assistant", "tool")


class ApiMessage(msgspec.Struct, frozen=True):
    """One message of a request, as Hearth stores it."""

    role: str
    text: str
    reasoning: str = ""
    tool_calls: tuple[p.ToolCall, ...] = ()
    tool_call_id: str = ""

    @property
    def tool_part(self) -> str:
        return p.tool_part(self.tool_calls, self.tool_call_id)


def api_messages(body: ChatRequest) -> list[ApiMessage]:
    """Each message, checked; the last is the one to answer (a user's question or a tool's result)."""
    if not body.messages:
        raise RequestRefused("'messages' is empty: send at least one message", "messages")
    messages: list[ApiMessage] = []
    called: set[str] = set()
    for index, message in enumerate(body.messages):
        if message.role not in ROLES:
            raise RequestRefused(f"messages[{index}].role '{message.role}' is not one of {', '.join(ROLES)}",
                                 f"messages[{index}].role")
        role = "system" if message.role == "developer" else message.role
        reasoning = (message.reasoning_content or "").strip() if role == "assistant" else ""
        calls = _calls(message, index) if role == "assistant" else ()
        called.update(call.id for call in calls)
        call_id = _answered_call(message, index, called) if role == "tool" else ""
        messages.append(ApiMessage(role, message_text(message.content, index), reasoning, calls, call_id))
    if messages[-1].role == "assistant":
        raise RequestRefused("the last message is the assistant's: end with a user message to answer",
                             "messages")
    return messages


def _calls(message: ChatMessageIn, index: int) -> tuple[p.ToolCall, ...]:
    calls = []
    for number, call in enumerate(message.tool_calls or []):
        place = f"messages[{index}].tool_calls[{number}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            raise RequestRefused(f"Invalid '{place}': a call is {{\"id\": \"...\", \"type\": \"function\", "
                                 "\"function\": {\"name\": \"...\", \"arguments\": \"{...}\"}}", place, "invalid_request")
        calls.append(_call(call["id"], function, place))
    if len(calls) > MAX_CALLS:
        raise RequestRefused(f"messages[{index}] makes {len(calls)} calls; at most {MAX_CALLS} are taken",
                             f"messages[{index}].tool_calls")
    return tuple(calls)


def _call(call_id: str, function: dict[str, Any], place: str) -> p.ToolCall:
    name, arguments = function.get("name"), function.get("arguments", "{}")
    if isinstance(arguments, dict):  # some clients send the object itself
        arguments = json.dumps(arguments, ensure_ascii=False)
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise RequestRefused(f"Invalid '{place}.function.arguments': it must be a JSON object, as text",
                             f"{place}.function.arguments", "invalid_request")
    try:
        return msgspec.convert({"id": call_id, "name": name, "arguments": arguments}, p.ToolCall)
    except msgspec.ValidationError as exc:
        raise RequestRefused(f"Invalid '{place}': {str(exc).split(' - at ')[0]}", place, "invalid_request") from None


def _answered_call(message: ChatMessageIn, index: int, called: set[str]) -> str:
    call_id = message.tool_call_id
    if not call_id:
        raise RequestRefused(f"messages[{index}] is a tool's result without 'tool_call_id': name the call it answers",
                             f"messages[{index}].tool_call_id")
    if call_id not in called:
        raise RequestRefused(f"messages[{index}].tool_call_id {call_id[:64]!r} names no call an earlier assistant "
                             "message made", f"messages[{index}].tool_call_id")
    return call_id


def message_text(content: str | list[dict[str, Any]] | None, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for number, part in enumerate(content):
        try:
            texts.append(msgspec.convert(part, TextPart).text)
        except msgspec.ValidationError as exc:
            kind = part.get("type", "?") if isinstance(part, dict) else "?"
            place = f"messages[{index}].content[{number}]"
            if kind == "text":  # a text part with something else than one string 'text'
                raise RequestRefused(f"Invalid '{place}': a text part is {{\"type\": \"text\", \"text\": "
                                     f"\"...\"}} ({str(exc).split(' - at ')[0]})", place, "invalid_request") from None
            raise RequestRefused(f"messages[{index}] has a '{kind}' part: only text parts are supported",
                                 f"messages[{index}].content") from None
    return "".join(texts)
