"""The API's ``tools``, ``tool_choice`` and ``parallel_tool_calls``, as the engine takes them.

``tools`` are OpenAI's function tools (``{"type": "function", "function": {"name", "description",
"parameters"}}``); the model's chat template writes them into the prompt. ``tool_choice`` is ``auto``
(the default when tools are sent), ``none``, ``required`` or ``{"type": "function", "function":
{"name": ...}}``; for the last two the worker holds decoding to one well-formed call whose arguments
match the function's schema, so that schema must be one Hearth can hold an answer to
(:func:`engine.protocol.constraint.constraint_from_schema_text` names what is not). Each refusal is a
400 naming the field.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from app.surfaces.serve.schema import ChatRequest, RequestRefused
from engine import protocol as p
from engine.protocol.tools import MAX_TOOLS

CHOICES = ("auto", "none", "required")


def offered_tools(body: ChatRequest) -> tuple[p.ToolSpec, ...]:
    tools = body.tools or []
    if len(tools) > MAX_TOOLS:
        raise RequestRefused(f"'tools' holds {len(tools)} functions; at most {MAX_TOOLS} are taken", "tools")
    specs = tuple(_tool(tool, index) for index, tool in enumerate(tools))
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise RequestRefused("two of 'tools' have the same name: give each function its own", "tools")
    return specs


def _tool(tool: Any, index: int) -> p.ToolSpec:
    place = f"tools[{index}]"
    function = tool.get("function") if isinstance(tool, dict) and tool.get("type", "function") == "function" else None
    if not isinstance(function, dict):
        raise RequestRefused(f"Invalid '{place}': a tool is {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                             place, "invalid_request")
    parameters = function.get("parameters", {})
    if not isinstance(parameters, dict):
        raise RequestRefused(f"Invalid '{place}.function.parameters': it must be a JSON schema (an object)",
                             f"{place}.function.parameters", "invalid_request")
    description = function.get("description", "")
    try:
        return msgspec.convert({"name": function.get("name"), "description": description if description else "",
                                "parameters": json.dumps(parameters, ensure_ascii=False) if parameters else ""},
                               p.ToolSpec)
    except msgspec.ValidationError as exc:
        what = str(exc).split(" - at ")[0]
        raise RequestRefused(f"Invalid '{place}.function': {what} (a name is letters, digits, _ . -, at most 64)",
                             f"{place}.function", "invalid_request") from None


def tool_choice(body: ChatRequest, tools: tuple[p.ToolSpec, ...]) -> p.ToolChoice | None:
    """How the answer may call ``tools``; None when none are offered."""
    choice = body.tool_choice
    parallel = body.parallel_tool_calls is not False
    if not tools:
        if choice not in (None, "none", "auto"):
            raise RequestRefused("'tool_choice' asks for a call but no 'tools' were sent", "tool_choice")
        return None
    if choice is None or choice in CHOICES:
        chosen = p.ToolChoice(mode=choice or "auto", parallel=parallel)
    else:
        name = _named(choice)
        if name not in {tool.name for tool in tools}:
            raise RequestRefused(f"'tool_choice' names the function {name[:64]!r}, which is not among 'tools'",
                                 "tool_choice")
        chosen = p.ToolChoice(mode="named", name=name, parallel=parallel)
    if chosen.mode in ("required", "named"):
        _check_forced(tools, chosen.name)
    return chosen


def _named(choice: Any) -> str:
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RequestRefused("'tool_choice' is \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                             "\"function\": {\"name\": \"...\"}}", "tool_choice")
    return name


def _check_forced(tools: tuple[p.ToolSpec, ...], name: str) -> None:
    """A forced call's arguments are held to their schema: it must be one Hearth can hold them to."""
    for index, tool in enumerate(tools):
        if tool.parameters and (not name or tool.name == name):
            try:
                p.constraint_from_schema_text(tool.parameters)
            except ValueError as exc:
                raise RequestRefused(f"'tools[{index}].function.parameters': {exc}",
                                     f"tools[{index}].function.parameters") from None
