"""The tools a conversation may use, in one place: what to offer the model (:meth:`Toolbox.specs`) and
running one of its calls (:meth:`Toolbox.run`), whether the tool is built in (app.services.tools.builtin)
or belongs to one of the user's MCP servers (app.services.tools.mcp_client).

A server's tools are offered as ``<server>_<tool>``, made to fit the protocol's names (letters,
digits, ``_ . -``; at most 64 characters; unique, a built-in keeping its own name). Its descriptions
and schemas are the server's; its descriptions are cleaned like any other text from a program.

A call never raises and never runs unbounded: the tool must exist and be switched on, its arguments
must fit its schema (app.services.tools.arguments), and it has :data:`TOOL_TIMEOUT_S` seconds. Whatever
comes back is cleaned and capped (app.services.tools.safe_text); whatever goes wrong becomes a
:class:`ToolResult` with ``ok=False`` and one sentence for the user, which is also what the model reads.

Server lifetime: servers are started on first use and kept running until :meth:`Toolbox.close`, on
one background thread with its own event loop; app.services.tools.mcp_client says why.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mcp_types as types

from app.services.tools.arguments import checked_arguments
from app.services.tools.builtin import BUILTINS, ToolContext
from app.services.tools.mcp_client import McpClient
from app.services.tools.mcp_content import result_text
from app.services.tools.safe_text import CUT_NOTE, MAX_RESULT_CHARS, capped, clean, one_line, safe
from app.services.tools.tool_problem import ToolProblem
from app.services.tools.tool_settings import BUILTIN_TOOLS, McpServer, ToolSettings
from engine.protocol.limits import MAX_SCHEMA_BYTES
from engine.protocol.tools import MAX_TOOL_NAME, MAX_TOOLS, ToolCall, ToolSpec
from model_store.conversations import ConversationStore
from model_store.db import StoreError

__all__ = ["MAX_RESULT_CHARS", "TOOL_TIMEOUT_S", "ToolResult", "Toolbox"]

log = logging.getLogger(__name__)

TOOL_TIMEOUT_S = 30.0  # a listing or a call; the test switch below shortens it
TIMEOUT_TEST_ENV = "HEARTH_TEST_TOOL_TIMEOUT_S"
MAX_DESCRIPTION_CHARS = 2_000  # of a server's description of a tool


def tool_timeout_s() -> float:
    """The time limit of a listing or a call: :data:`TOOL_TIMEOUT_S`, or the test switch's value."""
    try:
        value = float(os.environ.get(TIMEOUT_TEST_ENV, ""))
    except ValueError:
        return TOOL_TIMEOUT_S
    return value if value > 0 else TOOL_TIMEOUT_S


@dataclass(frozen=True)
class ToolResult:
    """What came of one call: the text the model reads and the window shows (cleaned, at most
    :data:`MAX_RESULT_CHARS`), whether it ran, and if not, why in one sentence."""

    text: str
    ok: bool
    problem: str = ""
    seconds: float = 0.0
    note: str = ""  # when it ran but its text was cut to fit: one sentence saying so


@dataclass(frozen=True)
class _Offered:
    """One tool as the model is offered it, and where it lives (``server`` None: built in)."""

    spec: ToolSpec
    server: McpServer | None = None
    tool: str = ""  # the server's own name for it


class Toolbox:
    """The switched-on tools of one :class:`ToolSettings`. Any thread may call any method, also at the
    same time; listing and running block (up to the time limit), so call them off the GUI thread."""

    def __init__(self, settings: ToolSettings, open_store: Callable[[], ConversationStore] | None = None) -> None:
        """``open_store`` opens the saved conversations for ``search_conversations``: called once, on the
        first search; the toolbox keeps that store (its own connection, used one search at a time) and
        closes it in :meth:`close`. It should only open the database
        (``ConversationStore(open_database(path))``), not tidy it as after a crash, since the window is
        using it meanwhile."""
        self.settings = settings
        self._open_store = open_store
        self._store: ConversationStore | None = None
        self._store_lock = threading.Lock()
        self._mcp = McpClient()
        self._offered: dict[str, _Offered] | None = None  # from the last specs(); None: never listed
        self._problems: list[str] = []

    def specs(self) -> tuple[ToolSpec, ...]:
        """The switched-on tools: built-ins first, then each switched-on server's. A server that cannot
        be listed gives none (:meth:`problems` says why); this never raises."""
        enabled = set(self.settings.enabled)
        offered = {name: _Offered(tool.spec) for name, tool in BUILTINS.items() if name in enabled}
        servers = [server for server in self.settings.servers if server.name in enabled]
        problems: list[str] = []
        for server, listing in zip(servers, self._listings(servers)):
            if isinstance(listing, ToolProblem):
                problems.append(str(listing))
                continue
            taken = set(BUILTIN_TOOLS) | set(offered)  # a built-in keeps its name, switched on or not
            offered.update((entry.spec.name, entry) for entry in _offered_tools(server, listing, taken))
        if len(offered) > MAX_TOOLS:
            problems.append(f"A model can be offered at most {MAX_TOOLS} tools at once, so {len(offered) - MAX_TOOLS} "
                            "tools of your servers were left out; switch off servers you do not need in "
                            "Settings → Tools.")
            offered = dict(list(offered.items())[:MAX_TOOLS])
        self._offered, self._problems = offered, problems
        return tuple(entry.spec for entry in offered.values())

    def _listings(self, servers: list[McpServer]) -> list[list[types.Tool] | ToolProblem]:
        """Each server's tools or why not; never raises."""
        if not servers:
            return []
        try:
            return self._mcp.tools_of(servers, tool_timeout_s())
        except ToolProblem as problem:
            return [problem] * len(servers)
        except Exception as error:  # a bug must not keep the built-in tools from being offered
            log.exception("listing MCP servers failed")
            return [ToolProblem(f"Hearth could not list the tools of '{server.name}' ({type(error).__name__}).")
                    for server in servers]

    def listed(self, server: McpServer) -> tuple[list[ToolSpec], str]:
        """One server's tools with the names they are offered under, or ``[]`` and why not in one
        sentence (for Settings → Tools; the server need not be switched on)."""
        try:
            tools = self._mcp.tools(server, tool_timeout_s())
        except ToolProblem as problem:
            return [], str(problem)
        except Exception as error:  # never raises: the Settings page shows the sentence
            log.exception("listing MCP server %r failed", server.name)
            return [], f"Hearth could not list the tools of '{server.name}' ({type(error).__name__})."
        return [entry.spec for entry in _offered_tools(server, tools, set(BUILTIN_TOOLS))], ""

    def problems(self) -> list[str]:
        """One sentence per server that could not be listed by the last :meth:`specs`."""
        return list(self._problems)

    def run(self, call: ToolCall) -> ToolResult:
        """Run one call, within the time limit; never raises (see the module's docstring)."""
        started = time.monotonic()
        try:
            text, problem = self._run(call)
        except ToolProblem as failure:
            text = problem = str(failure)
        except Exception as error:  # a bug must not take the conversation down with it
            log.exception("tool %r failed", call.name)
            text = problem = (f"The tool '{one_line(call.name, MAX_TOOL_NAME)}' failed unexpectedly "
                              f"({type(error).__name__}); try again, and if it keeps failing, switch it off.")
        problem = one_line(problem, 1_000) if problem else ""
        text = safe(text)
        note = "" if problem or CUT_NOTE not in text else \
            f"The tool '{one_line(call.name, MAX_TOOL_NAME)}' returned more text than a result may have; the model " \
            f"read its first {MAX_RESULT_CHARS:,} characters."
        return ToolResult(text, not problem, problem, time.monotonic() - started, note)

    def close(self) -> None:
        """Stop the servers this toolbox started, and close its store. It may still be used afterwards
        (servers are then started again), but the window's part is to make a new one."""
        self._mcp.close()
        with self._store_lock:
            store, self._store = self._store, None
        if store is not None:
            store.db.close()

    # ------------------------------------------------------------------ running a call

    def _run(self, call: ToolCall) -> tuple[str, str]:
        """The result's text and "" when it ran, else the problem as both."""
        offered = self._find(call.name)
        arguments = checked_arguments(call.name, call.arguments, offered.spec.parameters)
        timeout = tool_timeout_s()
        if offered.server is None:
            context = ToolContext(list(self.settings.folders), timeout, self._conversations)
            return BUILTINS[call.name].run(arguments, context), ""
        result = self._mcp.call(offered.server, offered.tool, arguments, timeout, shown_as=call.name)
        return _server_result(call.name, result)

    def _find(self, name: str) -> _Offered:
        if name in BUILTINS and name in self.settings.enabled:
            return _Offered(BUILTINS[name].spec)
        if self._offered is None:  # a call before anything was offered (say, after a restart)
            self.specs()
        offered = (self._offered or {}).get(name)
        if offered is None or offered.server is None:
            raise ToolProblem(f"The model asked for a tool called '{one_line(name, MAX_TOOL_NAME)}', which is not "
                              "switched on, so nothing ran.")
        return offered

    @contextmanager
    def _conversations(self) -> Iterator[ConversationStore]:
        """The saved conversations, opened on first use, one search at a time."""
        with self._store_lock:
            if self._store is None:
                self._store = self._opened_store()
            yield self._store

    def _opened_store(self) -> ConversationStore:
        if self._open_store is None:
            raise ToolProblem("The tool 'search_conversations' cannot reach your saved conversations here.")
        try:
            return self._open_store()
        except (StoreError, sqlite3.Error, OSError) as error:
            raise ToolProblem(f"The tool 'search_conversations' could not open your saved conversations "
                              f"({one_line(str(error), 160).rstrip('.')}).") from None


def _server_result(name: str, result: types.CallToolResult) -> tuple[str, str]:
    """A server's result as (text, problem): a result the server marks as an error is a problem
    quoting its first line, and the model reads all of it."""
    text, total = result_text(result)
    if not result.is_error:
        return capped(clean(text), total=total) or "(The tool finished without returning any text.)", ""
    message = clean(text).strip()
    first = one_line(message.splitlines()[0] if message else "", 300).rstrip(".")
    problem = f"The tool '{name}' reported a problem: {first or 'it gave no details'}."
    return (problem if message == first else f"{problem}\n\n{message}"), problem


def _offered_tools(server: McpServer, tools: list[types.Tool], taken: set[str]) -> list[_Offered]:
    """A server's tools as the model is offered them; ``taken`` (names already offered) grows."""
    offered = []
    for tool in tools:
        parameters = json.dumps(tool.input_schema, ensure_ascii=False, default=str)
        if len(parameters) > MAX_SCHEMA_BYTES:
            log.warning("tool %r of server %r left out: its schema has %d characters", tool.name, server.name,
                        len(parameters))
            continue
        description = clean(tool.description or tool.title or "").strip()
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
        spec = ToolSpec(offered_name(server.name, tool.name, taken), description, parameters)
        offered.append(_Offered(spec, server, tool.name))
    return offered


def offered_name(server: str, tool: str, taken: set[str]) -> str:
    """``<server>_<tool>`` in the protocol's letters (accents dropped, anything else becoming "_"),
    at most 64 characters, with "_2", "_3"… when ``taken`` has it already; added to ``taken``."""
    plain = unicodedata.normalize("NFKD", f"{server}_{tool}").encode("ascii", "ignore").decode()
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", plain).strip("_")[:MAX_TOOL_NAME] or "tool"
    name, number = base, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = base[: MAX_TOOL_NAME - len(suffix)] + suffix, number + 1
    taken.add(name)
    return name
