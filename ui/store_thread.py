"""Database work off the GUI thread: the window's side.

The worker process writes snapshots into the same SQLite file, so any write from the GUI can wait
on its lock (up to the busy timeout), and reading a long conversation takes time. Every store call
therefore runs on one background thread that owns its own connection
(:class:`app.services.store_loop.StoreLoop`, which runs the jobs there). This module runs on
the GUI thread only: it queues jobs, and the loop's reports come back as queued signals, so each
result is handed to its caller's callback here. Jobs run in the order they were submitted, so a
write followed by a read sees the write.

Damage, a read-only file and recovery are the loop's to find (see its module); this side says
them through :attr:`StoreThread.damaged`, :attr:`StoreThread.read_only` and :attr:`StoreThread.failed`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.services.store_loop import RECOVER, STOP, Job, StoreLoop, StoreReports


class StoreThread(QObject):
    """Runs ``job(store)`` calls one after another on a background thread."""

    failed = Signal(str)  # a job raised; the message is for the user
    damaged = Signal(object)  # DatabaseDamaged: said once; nothing is written to the file any more
    read_only = Signal(object)  # DatabaseReadOnly: the file was opened for reading only
    _finished = Signal(object, object)  # (callback, result) — crosses to the GUI thread

    def __init__(self, db_path: Path) -> None:
        """Jobs can be submitted at once; they run after :meth:`start`."""
        super().__init__()
        self.db_path = db_path
        self._jobs: queue.Queue = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._finished.connect(self._deliver)
        reports = StoreReports(deliver=self._finished.emit, failed=self.failed.emit, damaged=self.damaged.emit,
                               read_only=self.read_only.emit)
        loop = StoreLoop(db_path, self._jobs, reports)
        self._thread = threading.Thread(target=loop.run, name="store", daemon=True)

    def start(self) -> None:
        """Open the database on the thread (a failure is reported through :attr:`failed`), then run jobs."""
        self._thread.start()

    def submit(self, job: Job, on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[str], None] | None = None) -> None:
        """Run ``job`` on the store thread; ``on_done(result)`` or ``on_error(message)`` follow on the GUI thread."""
        with self._lock:
            self._pending += 1
        self._jobs.put((job, on_done, on_error))

    def recover(self, on_done: Callable[[Any], None], on_error: Callable[[str], None]) -> None:
        """Close the damaged file, copy what is readable into a new one (``on_done(Recovery)``), go on with it."""
        self.submit(RECOVER, on_done, on_error)

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._pending > 0

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the queued jobs, then close the connection."""
        self._jobs.put(STOP)
        if self._thread.is_alive():
            self._thread.join(timeout)

    @Slot(object, object)
    def _deliver(self, callback: Callable[[Any], None] | None, result: Any) -> None:
        try:
            if callback is not None:
                callback(result)
        finally:
            with self._lock:
                self._pending -= 1
