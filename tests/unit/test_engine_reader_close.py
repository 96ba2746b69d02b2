"""The engine-reader thread when the worker's stdout is closed under its read (issue 32, point 16):
about 1 failed model load in 20 printed ``Exception in thread engine-reader … OSError: [Errno 9] Bad
file descriptor``. A read that fails so is the end of the stream: no traceback, and the death is
reported as an event unless the app was closing the worker itself."""

from __future__ import annotations

import errno
import queue
import subprocess
import sys
import threading

import pytest

from app.engine_clients.client import EngineDead
from app.engine_clients.process_client import ProcessClient


class ClosedUnderTheRead:
    """A pipe closed by another thread while this one reads it."""

    def read(self, _size: int) -> bytes:
        raise OSError(errno.EBADF, "Bad file descriptor")


@pytest.fixture
def worker():
    """A real child process standing in for an exited worker (only its exit status is read)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE)
    process.wait()
    process.stdout.close()
    process.stdout = ClosedUnderTheRead()
    return process


def read_in_a_thread(client: ProcessClient, process) -> tuple[list, list]:
    """The events the reader put, and the exceptions that escaped its thread."""
    escaped: list = []
    previous, threading.excepthook = threading.excepthook, escaped.append
    try:
        events: queue.Queue = queue.Queue()
        reader = threading.Thread(target=client._read, args=(process, events), name="engine-reader")
        reader.start()
        reader.join(10)
    finally:
        threading.excepthook = previous
    return list(events.queue), escaped


def test_a_pipe_closed_while_closing_ends_the_reader_quietly(worker):
    client = ProcessClient()
    client._closing = True
    events, escaped = read_in_a_thread(client, worker)
    assert (events, escaped) == ([], [])


def test_a_pipe_that_fails_otherwise_is_the_workers_death(worker):
    events, escaped = read_in_a_thread(ProcessClient(), worker)
    assert escaped == []
    assert len(events) == 1 and isinstance(events[0], EngineDead)
