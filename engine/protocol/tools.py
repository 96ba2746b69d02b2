"""Function calls as they cross the pipe: the tools a request offers, how the answer may use them, and
the calls an answer made.

A request offers ``tools`` (:class:`ToolSpec`) in its :class:`engine.protocol.commands.TemplateSpec`,
because the chat template writes them into the prompt, and says how the answer may use them in
``_Answering.tool_choice`` (:class:`ToolChoice`). The worker finds the calls in what the model wrote, in
its family's own form (engine.templates.tool_formats), and reports them in ``Finished.tool_calls``. An
assistant message that called tools carries them back in ``WireMessage.tool_calls``, and a tool's result
is a ``tool`` message naming its call (``WireMessage.tool_call_id``), so the template can write the
conversation again as it wants.

A message's tool part is part of its identity (model_store.message_identity): :func:`tool_part` is the
one text both sides hash and the store keeps.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import msgspec

from engine.protocol.limits import SchemaText

MAX_TOOL_NAME = 64  # OpenAI's limit on a function's name
MAX_TOOL_ID = 128
MAX_TOOLS = 128  # functions one request may offer
MAX_CALLS = 32  # calls one answer may make

ToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOOL_NAME, pattern=r"^[A-Za-z0-9_.-]+$")]
ToolId = Annotated[str, msgspec.Meta(max_length=MAX_TOOL_ID)]


class ToolSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One function a request offers: its name, what it does, and its parameters' JSON schema (as text;
    "": it takes none)."""

    name: ToolName
    description: SchemaText = ""
    parameters: SchemaText = ""


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One call an answer made: its id (the ``tool`` message with its result names it), the function's
    name and its arguments as JSON text (an object)."""

    id: ToolId
    name: ToolName
    arguments: SchemaText = "{}"


class ToolChoice(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How an answer may use the offered tools: ``auto`` (the model decides), ``none`` (a text answer:
    calls it writes stay text), ``required`` (one call, held to the form and the arguments' schema),
    ``named`` (one call of ``name``). ``parallel``: an ``auto`` answer may make several calls."""

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: Annotated[str, msgspec.Meta(max_length=MAX_TOOL_NAME)] = ""
    parallel: bool = True


ToolCalls = Annotated[list[ToolCall], msgspec.Meta(max_length=MAX_CALLS)]


def tool_part(calls: list[ToolCall] | tuple[ToolCall, ...], call_id: str) -> str:
    """The text a message's tool part hashes as and is stored as: "" for none, so every message without
    tools keeps the identity it had before tools existed; else canonical JSON (sorted keys, no spaces),
    so the same calls always give the same text."""
    if not calls and not call_id:
        return ""
    body: dict = {}
    if calls:
        body["calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    if call_id:
        body["call_id"] = call_id
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def calls_of(part: str) -> tuple[list[ToolCall], str]:
    """The calls and the call id a stored tool part holds (:func:`tool_part` reversed); nothing for ""
    or for what a damaged row holds."""
    if not part:
        return [], ""
    try:
        body = json.loads(part)
        calls = [ToolCall(str(c["id"]), str(c["name"]), str(c["arguments"])) for c in body.get("calls", [])]
        return calls, str(body.get("call_id", ""))
    except (ValueError, TypeError, KeyError, AttributeError):
        return [], ""
