"""What ``hearth serve`` and the programs that start it (the app, the tests) agree on: where the key
and the parent's process id come in, and how its output lines read."""

from __future__ import annotations

import re

KEY_ENV = "HEARTH_API_KEY"  # the key, kept out of the process list
PARENT_ENV = "HEARTH_SERVE_PARENT_PID"  # the server ends when this process has gone
REQUEST_PREFIX = "hearth serve: "  # stderr: one line per request answered or refused, and nothing else
NOTICE_PREFIX = "hearth: "  # stderr: anything else worth saying (a worker restarted)
CANNOT_LISTEN = "cannot listen on"  # how the error line about an unusable address or port begins
LISTENING = re.compile(r"listening on (http://(\S+):(\d+)/v1)")  # stdout, the first line


def listening_line(url: str, model: str, n_ctx: int | None) -> str:
    return f"hearth serve: listening on {url} (model {model}, context {n_ctx or '?'} tokens)"
