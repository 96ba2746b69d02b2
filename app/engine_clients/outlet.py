"""Where a client's events go: a queue for callers that read one at a time, or straight to a sink.

A blocking caller (the CLI, ``hearth serve``'s runner, the handshake) reads events with
:meth:`EventOutlet.get`. The window instead hands the outlet a sink
(:meth:`EventOutlet.hand_to`): from then on each event goes to it on the thread that produced it (the
process client's reader, the remote engine's thread), so one reader thread carries an event from
the pipe to the window's queued signal, with no relay threads between. Events queued before the
hand-over go first, in order. A closed outlet (its engine replaced by a fresh one) drops whatever a
late reader still puts in it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

Sink = Callable[[Any], None]


class EventOutlet:
    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._sink: Sink | None = None
        self._closed = False
        self._lock = threading.Lock()  # a hand-over drains the queue before any later event reaches the sink

    def put(self, event: Any) -> None:
        with self._lock:
            if self._closed:
                return
            if self._sink is None:
                self._queue.put(event)
                return
            sink = self._sink
        sink(event)  # outside the lock: each producer's events keep their order

    def get(self, timeout: float | None = None) -> Any | None:
        """The next queued event, or None after ``timeout`` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def hand_to(self, sink: Sink) -> None:
        """Send every later event to ``sink`` (and the queued ones now, first)."""
        with self._lock:
            while True:
                try:
                    sink(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._sink = sink

    def close(self) -> None:
        """Drop every later event (a late reader of an engine that was replaced)."""
        with self._lock:
            self._closed = True
