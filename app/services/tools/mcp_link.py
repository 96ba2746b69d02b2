"""One open connection to an MCP server: a server process Hearth started (stdio) or a server already
running on this computer (streamable HTTP), with its initialized ``mcp.ClientSession``.

A link lives on the tool loop (app.services.tools.mcp_client) as one task, :meth:`Link.hold`, that
enters the SDK's transport and session, initializes them and then waits until it is stopped: the SDK's
context managers must be entered and left by the same task, and keeping them open is what keeps the
server running between calls. Other tasks on the same loop make requests through :attr:`Link.session`
meanwhile. :meth:`Link.stop` cancels the holding task; the SDK then closes the server's standard input,
gives it two seconds, terminates it and kills it two seconds later (mcp.client.stdio), so a server
that hangs is gone within about four seconds, in the background.

A stdio server's standard error goes into a pipe a thread drains at once, keeping only the last few
kilobytes (:class:`StderrTail`): a server writing megabytes there never blocks and never fills memory,
and its last words can say why it would not start. The pipe reaching its end means the process has
exited, which is how a server that crashed between two calls is noticed (:attr:`Link.dead`).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AsyncExitStack
from typing import IO

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from app.services.tools.safe_text import one_line
from app.services.tools.tool_settings import McpServer

log = logging.getLogger(__name__)

_TAIL_BYTES = 4096  # what is kept of a server's standard error
_HTTP_READ_S = 300.0  # how long an HTTP response stream may stay open (the SDK's default); calls have their own limit


_LAST_WORDS_WAIT_S = 0.5  # for the drain to read what an exited server wrote last (a failure's words)


class StderrTail:
    """A pipe for a server's standard error, drained by a thread that keeps the last bytes only."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: IO[str] | None = os.fdopen(write_fd, "w")
        self._tail = bytearray()
        self._lock = threading.Lock()
        self.ended = threading.Event()  # the pipe's end: every process holding it has exited
        threading.Thread(target=self._drain, args=(read_fd,), name="mcp-stderr", daemon=True).start()

    def spawned(self) -> None:
        """The server has its copy of the pipe: close ours, so the end of the pipe means its exit."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def last_words(self) -> str:
        """The last non-empty line the server wrote there, on one line and cleaned ("" if none). A server
        that has just exited may still have bytes in the pipe: they are waited for, briefly."""
        self.ended.wait(_LAST_WORDS_WAIT_S)
        with self._lock:
            text = self._tail.decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if line.strip()]
        return one_line(lines[-1]) if lines else ""

    def _drain(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with self._lock:
                    self._tail += chunk
                    del self._tail[:-_TAIL_BYTES]
        self.ended.set()


class Link:
    """One server's connection, held open by the task running :meth:`hold`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.failure: BaseException | None = None  # why it could not be opened
        self.stderr: StderrTail | None = None
        self._scope = anyio.CancelScope()
        self._opened = anyio.Event()  # initialized, or failed trying
        self.closed = anyio.Event()

    @property
    def dead(self) -> bool:
        """Its server process has exited (a stdio server only; an HTTP server's end shows in a call)."""
        return self.closed.is_set() or (self.stderr is not None and self.stderr.ended.is_set())

    async def hold(self) -> None:
        """Open the connection, initialize the session, and keep both open until :meth:`stop`."""
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    read, write = await self._transport(stack)
                    session = await stack.enter_async_context(ClientSession(read, write))
                    await session.initialize()
                    self.session = session
                    self._opened.set()
                    await anyio.sleep_forever()
        except Exception as error:  # whatever starting it raised is reported in words by the caller
            self.failure = error
            log.info("MCP server %r ended: %r", self.server.name, error)
        finally:
            self.session = None
            if self.stderr is not None:
                self.stderr.spawned()  # (if spawning failed, the pipe was never handed over)
            self._opened.set()
            self.closed.set()

    async def opened(self) -> ClientSession | None:
        """The initialized session, once there is one; None if it could not be opened (see
        :attr:`failure`)."""
        await self._opened.wait()
        return self.session

    def stop(self) -> None:
        """Close the connection and stop the server (in the background, on the loop)."""
        self._scope.cancel()

    async def _transport(self, stack: AsyncExitStack) -> tuple:
        if self.server.url:
            client = await stack.enter_async_context(
                httpx2.AsyncClient(trust_env=False, timeout=httpx2.Timeout(30.0, read=_HTTP_READ_S)))
            streams = await stack.enter_async_context(streamable_http_client(self.server.url, http_client=client))
            return streams[0], streams[1]
        self.stderr = StderrTail()
        parameters = StdioServerParameters(command=self.server.command, args=list(self.server.args),
                                           encoding_error_handler="replace")
        streams = await stack.enter_async_context(stdio_client(parameters, errlog=self.stderr.writer))
        self.stderr.spawned()
        return streams[0], streams[1]
