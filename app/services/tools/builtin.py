"""Hearth's own tools: ``read_file`` (app.services.tools.file_reader), ``search_conversations``,
``calculator`` (app.services.tools.calculator) and ``current_time``.

Each is a :class:`BuiltinTool`: what the model is offered (its :class:`ToolSpec`: name, description,
parameter schema) and the function that runs it, given the call's checked arguments and a
:class:`ToolContext` (what the user shared, the time limit, the saved conversations). A tool returns
its result as text or raises :class:`ToolProblem` with a sentence for the user; the toolbox
(app.services.tools.toolbox) checks the arguments first and cleans and caps what comes back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from app.services.tools import calculator, file_reader
from app.services.tools.safe_text import one_line
from app.services.tools.tool_problem import ToolProblem
from engine.protocol.tools import ToolSpec
from model_store.conversations import ConversationStore
from model_store.db import StoreError

MAX_FOUND = 10  # conversations a search lists
MAX_SNIPPETS = 2  # matching passages shown of each
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class ToolContext:
    """What a built-in tool may use besides its arguments."""

    folders: list[str]  # the files and folders the user shared (Settings → Tools)
    timeout: float  # seconds the tool may take
    # the saved conversations, one user at a time (``with context.conversations() as store``); raises
    # ToolProblem when they cannot be reached
    conversations: Callable[[], AbstractContextManager[ConversationStore]]


@dataclass(frozen=True)
class BuiltinTool:
    spec: ToolSpec
    run: Callable[[dict, ToolContext], str]


def search_conversations(arguments: dict, context: ToolContext) -> str:
    """The tool: the saved conversations whose title or messages contain the query (as the window's
    search box finds them, ConversationStore.list), newest first, with a few matching passages."""
    query = str(arguments.get("query", "")).strip()
    try:
        with context.conversations() as store:
            found = store.list(query)
            lines = [_found_line(query, len(found))]
            for number, conversation in enumerate(found[:MAX_FOUND], 1):
                used = datetime.fromtimestamp(conversation.updated_at).strftime("%Y-%m-%d")
                lines.append(f'\n{number}. "{one_line(conversation.title, 120)}" (last used {used})')
                lines += [f"   {snippet}" for snippet in _snippets(store, conversation.id, query)]
    except (StoreError, sqlite3.Error) as error:
        raise ToolProblem(f"The tool 'search_conversations' could not read your saved conversations "
                          f"({one_line(str(error), 160).rstrip('.')}).") from None
    return "\n".join(lines)


def _found_line(query: str, count: int) -> str:
    quoted = f'"{one_line(query, 120)}"'
    if count == 0:
        return f"No saved conversation mentions {quoted}."
    shown = f" (the newest {MAX_FOUND} are listed)" if count > MAX_FOUND else ""
    return f"{count} saved conversation{'s' if count != 1 else ''} mention{'' if count != 1 else 's'} {quoted}{shown}:"


_SPEAKERS = {"user": "The user", "assistant": "The assistant", "tool": "A tool", "system": "The instructions"}


def _snippets(store: ConversationStore, conversation_id: str, query: str) -> list[str]:
    """Passages of the conversation's shown branch around the query, with who wrote them."""
    wanted = query.lower()
    snippets = []
    for message in store.current_branch(conversation_id):
        at = message.content.lower().find(wanted)
        if at < 0:
            continue
        start = max(0, at - (SNIPPET_CHARS - len(query)) // 2)
        piece = one_line(message.content[start:start + SNIPPET_CHARS], SNIPPET_CHARS)
        before, after = ("…" if start else ""), ("…" if start + SNIPPET_CHARS < len(message.content) else "")
        snippets.append(f"{_SPEAKERS.get(message.role, message.role)}: {before}{piece}{after}")
        if len(snippets) == MAX_SNIPPETS:
            break
    return snippets


def current_time(arguments: dict, context: ToolContext) -> str:
    """The tool: this computer's local date, time, weekday and time zone."""
    now = datetime.now().astimezone()
    offset = now.strftime("%z")
    utc = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    zone = now.tzname() or utc
    return (f"It is {now:%A}, {now.day} {now:%B %Y}, {now:%H:%M:%S} local time (time zone {zone}, {utc}); "
            f"ISO 8601: {now.isoformat(timespec='seconds')}.")


_NO_PARAMETERS = '{"type": "object", "properties": {}, "additionalProperties": false}'

BUILTINS: dict[str, BuiltinTool] = {
    file_reader.NAME: BuiltinTool(
        ToolSpec(file_reader.NAME, file_reader.DESCRIPTION, file_reader.PARAMETERS),
        lambda arguments, context: file_reader.read_file(arguments, context.folders, context.timeout)),
    "search_conversations": BuiltinTool(
        ToolSpec("search_conversations",
                 "Search the user's saved conversations with Hearth for words in their titles and messages. "
                 "Lists the newest matching conversations (at most 10) with their titles and short passages "
                 "around the words.",
                 '{"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "description": '
                 '"The words to look for (matched as written, ignoring case)."}}, "required": ["query"], '
                 '"additionalProperties": false}'),
        search_conversations),
    calculator.NAME: BuiltinTool(
        ToolSpec(calculator.NAME, calculator.DESCRIPTION, calculator.PARAMETERS),
        lambda arguments, context: calculator.calculate(arguments)),
    "current_time": BuiltinTool(
        ToolSpec("current_time", "Tell the current local date, time, weekday and time zone of the user's computer.",
                 _NO_PARAMETERS),
        current_time),
}
