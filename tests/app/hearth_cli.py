"""Running the real ``hearth`` command line (``python -m app``) from this checkout, with the test's
``HEARTH_HOME`` (the autouse fixture puts it in the environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def command(*args: str, prefix: tuple[str, ...] = ()) -> list[str]:
    return [*prefix, sys.executable, "-m", "app", *args]


def hearth(*args: str, timeout: float = 300, prefix: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    """Run one command to its end."""
    return subprocess.run(command(*args, prefix=prefix), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def start_hearth(*args: str, **env: str) -> subprocess.Popen:
    """Start one command; the caller waits for it."""
    return subprocess.Popen(command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one line a failed command prints on stderr (no traceback, exit status 1)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hearth: error: "), lines[0]
    return lines[0]
