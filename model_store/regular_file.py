"""Opening a model file without trusting the path: only a regular file is ever read.

A path a user gives may name a named pipe (FIFO), a device or a socket. ``open()`` on a FIFO waits
for a writer that never comes (``hearth info``, ``generate`` and ``serve`` hung for ever), and a
device such as ``/dev/zero`` reads without end. :func:`open_regular` looks first (``stat``), then
opens with ``O_NONBLOCK`` (so even a FIFO swapped in after the look cannot block the open) and
checks what it opened (``fstat``) before any byte is read.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

# What a path is, when it is not a regular file, as a user reads it.
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(OSError):
    """The path is not a regular file; the message says what it is and what to do."""


def not_regular_reason(mode: int) -> str | None:
    """Why a path with this ``st_mode`` cannot be a model file (None: it is a regular file)."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"it is {kind}, not a model file; give the path of a .gguf file"


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file.

    Raises:
        NotRegularFile: If it is a folder, FIFO, device or socket.
        OSError: If it cannot be opened at all.
    """
    if (reason := not_regular_reason(os.stat(path).st_mode)) is not None:
        raise NotRegularFile(reason)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if (reason := not_regular_reason(os.fstat(fd).st_mode)) is not None:
            raise NotRegularFile(reason)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
