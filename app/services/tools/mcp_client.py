"""The user's MCP servers, reached from any thread: listing a server's tools and calling one, each
bounded in time, every failure an :class:`ToolProblem` whose message is one sentence for the user.

Server lifetime: a server is started on first use and kept running (a persistent session), not started
again for every operation. Starting one costs about half a second (a Python server importing the SDK),
which would be paid by every listing and every call, and many servers keep state between calls (an
open browser, a login, a working folder), which a fresh process per call would lose. The sessions live
on one background thread running its own asyncio event loop (the tool loop), so callers stay
synchronous. A server that crashed is noticed before the next use (its standard error's pipe ended)
and started again; one that fails a call by closing the connection or by not answering within the
time limit is stopped, and started again next time. A server that did not list its tools in time is
left out of the tools offered for :data:`HOLD_OFF_S` seconds (so that every message does not wait for
it again), though the Settings page's listing tries it at once.

Addresses: a server at a URL is contacted only when its host is this computer (127.0.0.1 or any other
loopback address, ::1, localhost); anything else is refused in words before any connection is made.
The HTTP client ignores proxy settings from the environment, so a loopback address is never sent to a
proxy, and the SDK follows a redirect only within the same origin.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import ipaddress
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

from app.services.tools.mcp_link import Link
from app.services.tools.mcp_problems import (refused_problem, start_problem, stopped_problem, timeout_problem,
                                             unreadable_problem)
from app.services.tools.tool_problem import ToolProblem
from app.services.tools.tool_settings import McpServer

log = logging.getLogger(__name__)

MAX_PAGES = 20  # pages of a tool listing read before the rest is ignored
_LOOP_GRACE_S = 15.0  # beyond an operation's own limit, how long a caller waits for the loop itself
_CLOSE_WAIT_S = 10.0  # how long close() waits for the servers to stop
HOLD_OFF_S = 300.0  # how long a server that did not list its tools in time is not asked again by tools_of


def address_problem(server: McpServer) -> str:
    """Why Hearth will not contact ``server`` at its URL, in one sentence; "" when its host is this
    computer (or it has no URL)."""
    if not server.url:
        return "" if server.command else (f"The tool server '{server.name}' has neither a command nor an address; "
                                          "give it one in Settings → Tools.")
    parts = urlsplit(server.url)
    host = (parts.hostname or "").lower()
    if parts.scheme in ("http", "https") and _is_loopback(host):
        return ""
    shown = host or server.url
    return (f"The tool server '{server.name}' is at {shown}, which is not this computer, so Hearth did not contact "
            "it; Hearth only reaches servers at 127.0.0.1, ::1 or localhost, so change its address in "
            "Settings → Tools.")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _key(server: McpServer) -> tuple:
    return server.name, server.command, tuple(server.args), server.url


class McpClient:
    """Sessions with MCP servers, kept open on the tool loop. Thread-safe: any thread may list and
    call, also at the same time; :meth:`close` stops every server it started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._links: dict[tuple, Link] = {}  # touched on the loop only
        self._holders: dict[asyncio.Task, Link] = {}  # every link not yet closed, dropped ones too, by its task
        self._hung: dict[tuple, tuple[float, ToolProblem]] = {}  # listings that timed out: until when, and why

    def tools(self, server: McpServer, timeout: float) -> list[types.Tool]:
        """The server's tools (starting it if needed), read within ``timeout`` seconds.

        Raises:
            ToolProblem: It could not be reached, started or listed in time.
        """
        listing = self.tools_of([server], timeout, again=True)[0]
        if isinstance(listing, ToolProblem):
            raise listing
        return listing

    def tools_of(self, servers: list[McpServer], timeout: float, *,
                 again: bool = False) -> list[list[types.Tool] | ToolProblem]:
        """Each server's tools, or why they could not be listed; the servers are asked at the same time,
        so this takes at most ``timeout`` seconds however many there are. A server whose listing timed
        out in the last :data:`HOLD_OFF_S` seconds is not asked (its problem is given again) unless
        ``again``."""
        return self._run(self._list_many(servers, timeout, again), timeout)

    def call(self, server: McpServer, tool: str, arguments: dict[str, Any], timeout: float, *,
             shown_as: str) -> types.CallToolResult:
        """Call the server's ``tool`` (offered to the model as ``shown_as``) within ``timeout`` seconds.

        Raises:
            ToolProblem: The server could not be started, stopped while answering, refused the call
                or did not answer in time (then it is stopped).
        """
        return self._run(self._call(server, tool, arguments, timeout, shown_as), timeout)

    def close(self) -> None:
        """Stop every server this client started, waiting up to ten seconds for them to exit, and the
        loop. The client may be used again afterwards: it starts what it needs."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(_CLOSE_WAIT_S + 5)
        except (concurrent.futures.TimeoutError, RuntimeError) as error:
            log.warning("MCP servers did not all stop in time: %r", error)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)

    # ------------------------------------------------------------------ on the caller's thread

    def _run(self, operation: Coroutine[Any, Any, Any], timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(operation, self._running_loop())
        try:
            return future.result(timeout + _LOOP_GRACE_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolProblem("Hearth's tool connections stopped responding; restart Hearth to use tools "
                              "again.") from None
        except concurrent.futures.CancelledError:
            raise ToolProblem("Hearth closed its tool connections while this was running; try again.") from None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                _open_clients.add(self)
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=_serve, args=(self._loop,), name="mcp-tool-loop", daemon=True)
                self._thread.start()
            return self._loop

    # ------------------------------------------------------------------ on the tool loop

    async def _list_many(self, servers: list[McpServer], timeout: float,
                         again: bool) -> list[list[types.Tool] | ToolProblem]:
        async def one(server: McpServer) -> list[types.Tool] | ToolProblem:
            until, problem = self._hung.get(_key(server), (0.0, None))
            if problem is not None and not again and time.monotonic() < until:
                return problem
            try:
                tools = await self._list(server, timeout)
            except ToolProblem as problem:
                return problem
            self._hung.pop(_key(server), None)
            return tools

        return list(await asyncio.gather(*(one(server) for server in servers)))

    async def _list(self, server: McpServer, timeout: float) -> list[types.Tool]:
        link = None
        with anyio.move_on_after(timeout):
            link = await self._link(server, None)
            tools: list[types.Tool] = []
            cursor = None
            for _ in range(MAX_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await self._request(link, None, lambda session, params=params: session.list_tools(params=params))
                tools.extend(page.tools)
                if not (cursor := page.next_cursor):
                    break
            return tools
        self._drop(server, link or self._links.get(_key(server)))  # (None: it hung while starting)
        stopped = timeout_problem(server, None, timeout, listing=True).removesuffix(".")
        problem = ToolProblem(f"{stopped} and its tools are left out for {HOLD_OFF_S / 60:g} minutes.")
        self._hung[_key(server)] = (time.monotonic() + HOLD_OFF_S, problem)
        raise problem

    async def _call(self, server: McpServer, tool: str, arguments: dict[str, Any], timeout: float,
                    shown_as: str) -> types.CallToolResult:
        link = None
        with anyio.move_on_after(timeout):
            link = await self._link(server, shown_as)
            return await self._request(link, shown_as, lambda session: session.call_tool(tool, arguments))
        self._drop(server, link or self._links.get(_key(server)))  # (None: it hung while starting)
        raise ToolProblem(timeout_problem(server, shown_as, timeout, listing=False))

    async def _link(self, server: McpServer, tool: str | None) -> Link:
        """The server's link with an open session, started (or started again, if its process exited)
        when needed."""
        if problem := address_problem(server):
            raise ToolProblem(problem if tool is None else f"The tool '{tool}' did not run: the{problem[3:]}")
        link = self._links.get(_key(server))
        if link is None or link.dead:
            self._drop(server, link)
            link = self._links[_key(server)] = Link(server)
            task = asyncio.get_running_loop().create_task(link.hold())
            self._holders[task] = link
            task.add_done_callback(self._holders.pop)
        if await link.opened() is None:
            self._drop(server, link)
            raise ToolProblem(start_problem(server, tool, link.failure, link.stderr))
        return link

    async def _request(self, link: Link, tool: str | None,
                       request: Callable[[ClientSession], Coroutine[Any, Any, Any]]) -> Any:
        """Make one request of the link's session; a failure that leaves the session unusable stops the
        server."""
        try:
            if link.session is None:  # stopped meanwhile, by another caller's failure
                raise MCPError(CONNECTION_CLOSED, "Connection closed")
            return await request(link.session)
        except MCPError as error:
            if error.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise ToolProblem(refused_problem(link.server, tool, error.message)) from None
            self._drop(link.server, link)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            self._drop(link.server, link)
        except Exception as error:  # an answer the SDK could not read: start afresh next time
            log.info("MCP request to %r failed: %r", link.server.name, error)
            self._drop(link.server, link)
            raise ToolProblem(unreadable_problem(link.server, tool, error)) from None
        raise ToolProblem(stopped_problem(link.server, tool, link.stderr))

    def _drop(self, server: McpServer, link: Link | None) -> None:
        """Stop ``link`` (when there is one) and forget it, unless a newer link took its place."""
        if link is None:
            return
        link.stop()
        if self._links.get(_key(server)) is link:
            del self._links[_key(server)]

    async def _stop_all(self) -> None:
        """Stop every link, those already dropped but still stopping too, and wait for them to close."""
        self._links = {}
        links = list(self._holders.values())
        for link in links:
            link.stop()
        with anyio.move_on_after(_CLOSE_WAIT_S):
            for link in links:
                await link.closed.wait()


_open_clients: weakref.WeakSet[McpClient] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, stop the servers of every client not closed: their processes run in sessions of their
    own, so a server that ignores the end of its input would otherwise outlive Hearth."""
    for client in list(_open_clients):
        client.close()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The tool loop's thread: run the loop until close() stops it, then close it."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
