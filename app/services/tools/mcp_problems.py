"""What went wrong with a tool or its MCP server, in one sentence a user can act on.

Each sentence names what failed (the tool as the model was offered it, or the server by the name the
user gave it in Settings → Tools) and, where the user can do something, what. A server's own words
(its last line on standard error, an error message) are quoted cleaned and on one line.
"""

from __future__ import annotations

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from app.services.tools.mcp_link import StderrTail
from app.services.tools.safe_text import one_line
from app.services.tools.tool_problem import seconds
from app.services.tools.tool_settings import McpServer


def start_problem(server: McpServer, tool: str | None, failure: BaseException | None, stderr: StderrTail | None) -> str:
    """The server could not be started (stdio) or reached (HTTP)."""
    failure = _innermost(failure)
    verb = "reached" if server.url else "started"
    reason, advice = _why_not_started(server, failure, stderr)
    if tool is None:
        return f"The tool server '{server.name}' could not be {verb}: {reason}; {advice}."
    return f"The tool '{tool}' did not run because its server '{server.name}' could not be {verb}: {reason}; {advice}."


def stopped_problem(server: McpServer, tool: str | None, stderr: StderrTail | None) -> str:
    """The connection ended (or became unreadable) in the middle of a request."""
    said = _last_words(stderr)
    if tool is None:
        return (f"The tool server '{server.name}' stopped before it listed its tools{said}; Hearth starts it again "
                "the next time its tools are needed.")
    return (f"The tool '{tool}' stopped before it answered (its server '{server.name}' closed the connection{said}); "
            "Hearth starts the server again for the next call.")


def timeout_problem(server: McpServer, tool: str | None, timeout: float, *, listing: bool) -> str:
    """The server did not answer in time, and was stopped."""
    if listing or tool is None:
        return f"The tool server '{server.name}' did not list its tools within {seconds(timeout)}, so it was stopped."
    return f"The tool '{tool}' did not answer within {seconds(timeout)}, so it was stopped."


def refused_problem(server: McpServer, tool: str | None, message: str) -> str:
    """The server answered the request with an error."""
    what = f"The tool '{tool}'" if tool else f"The tool server '{server.name}'"
    return f"{what} refused the request: {one_line(message).rstrip('.') or 'it gave no reason'}."


def unreadable_problem(server: McpServer, tool: str | None, error: Exception) -> str:
    """The server answered, but not in a form the SDK accepts (a malformed result, say)."""
    detail = one_line(str(error), 160).rstrip(".") or type(error).__name__
    if tool is None:
        return f"The tool server '{server.name}' listed its tools in a form Hearth could not read ({detail})."
    return f"The tool '{tool}' answered in a form Hearth could not read ({detail})."


def _why_not_started(server: McpServer, failure: BaseException | None, stderr: StderrTail | None) -> tuple[str, str]:
    check = "check its command in Settings → Tools"
    if isinstance(failure, FileNotFoundError):
        return f"the program '{one_line(server.command)}' was not found", check
    if isinstance(failure, PermissionError):
        return f"Hearth is not allowed to run '{one_line(server.command)}'", check
    if isinstance(failure, OSError) and not server.url:
        return f"'{one_line(server.command)}' could not be run ({failure.strerror or failure})", check
    if isinstance(failure, httpx2.TransportError | OSError):
        return f"nothing answered at {one_line(server.url)}", "check that the server is running and its address"
    if isinstance(failure, MCPError) and failure.code == CONNECTION_CLOSED:
        where = "its connection closed" if server.url else "it stopped as it started"
        return where + _last_words(stderr), check if not server.url else "check that the server is running"
    if failure is None:  # stopped while it started: a time limit, or close()
        return "it was stopped while it started", "try again"
    detail = one_line(str(failure))
    return (f"it did not answer as an MCP server does ({detail or type(failure).__name__})",
            "check that it is an MCP server and that its settings are right")


def _last_words(stderr: StderrTail | None) -> str:
    words = stderr.last_words() if stderr is not None else ""
    return f", its last words: “{words}”" if words else ""


def _innermost(failure: BaseException | None) -> BaseException | None:
    """The first real error inside the exception groups anyio's task groups wrap errors in."""
    while isinstance(failure, BaseExceptionGroup) and failure.exceptions:
        failure = failure.exceptions[0]
    return failure
