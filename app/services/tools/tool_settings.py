"""What the user chose in Settings → Tools: which tools are on, which run without asking, which files and
folders the file tool may read, and the MCP servers Hearth starts or reaches.

Every tool is off until the user turns it on. A tool on the ``always`` list runs without asking; any
other asks each time (the window's confirmation). An MCP server is a local command Hearth starts and
talks to over its standard input and output (``command`` and ``args``), or a server already running on
this computer (``url``, loopback only: app.services.tools.mcp_client checks it).
"""

from __future__ import annotations

import msgspec

BUILTIN_TOOLS = ("read_file", "search_conversations", "calculator", "current_time")


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str  # what the user calls it; its tools are offered as ``<name>_<tool>``
    command: str = ""  # a program to start (stdio); "" for a server at ``url``
    args: list[str] = []
    url: str = ""  # a loopback streamable-HTTP address, e.g. http://127.0.0.1:8000/mcp


class ToolSettings(msgspec.Struct, forbid_unknown_fields=True):
    enabled: list[str] = []  # built-in tools and MCP servers (by name) that are on
    always: list[str] = []  # tools (as offered to the model) that run without asking
    folders: list[str] = []  # files and folders the user picked for ``read_file``
    servers: list[McpServer] = []


def tool_settings_problem(tools: ToolSettings) -> str | None:
    """What is wrong with the MCP servers the user entered, in one sentence (None: nothing)."""
    names = [server.name for server in tools.servers]
    for server in tools.servers:
        if not server.name or not all(c.isalnum() or c in "-_" for c in server.name):
            return f"The server name '{server.name}' may only have letters, digits, - and _."
        if names.count(server.name) > 1:
            return f"Two servers are called '{server.name}'; give each its own name."
        if not server.command and not server.url:
            return f"The server '{server.name}' needs a command to start it or a local address."
    return None
