"""Database work off the GUI thread.

The worker process writes snapshots into the same SQLite file, so any write from the GUI can wait
on its lock (up to the busy timeout), and reading a long conversation takes time. Every store call
therefore runs on one background thread that owns its own connection; the result comes back to the
GUI thread as a queued signal and is handed to the caller's callback there. Jobs run in the order
they were submitted, so a write followed by a read sees the write.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from model_store.conversations import ConversationStore
from model_store.db import StoreError, open_database

Job = Callable[[ConversationStore], Any]
_STOP = object()


class StoreThread(QObject):
    """Runs ``job(store)`` calls one after another on a background thread."""

    failed = Signal(str)  # a job raised; the message is for the user
    _finished = Signal(object, object)  # (callback, result) — crosses to the GUI thread

    def __init__(self, db_path: Path) -> None:
        """Jobs can be submitted at once; they run after :meth:`start`."""
        super().__init__()
        self.db_path = db_path
        self._jobs: queue.Queue = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._finished.connect(self._deliver)
        self._thread = threading.Thread(target=self._run, name="store", daemon=True)
        self._open_error: str | None = None

    def start(self) -> None:
        """Open the database on the thread (a failure is reported through :attr:`failed`), then run jobs."""
        self._thread.start()

    def submit(self, job: Job, on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[str], None] | None = None) -> None:
        """Run ``job`` on the store thread; ``on_done(result)`` or ``on_error(message)`` follow on the GUI thread."""
        with self._lock:
            self._pending += 1
        self._jobs.put((job, on_done, on_error))

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._pending > 0

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the queued jobs, then close the connection."""
        self._jobs.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        store = self._open()
        while (item := self._jobs.get()) is not _STOP:
            job, on_done, on_error = item
            if store is None:
                self._finished.emit(_error_callback(on_error, self), self._open_error)
                continue
            try:
                result = job(store)
            except (StoreError, OSError, ValueError, sqlite3.Error) as exc:
                self._finished.emit(_error_callback(on_error, self), str(exc))
            except Exception as exc:  # a bug: report it, keep the thread (and every later job) alive
                self._finished.emit(_error_callback(on_error, self), f"internal error in the store: {exc!r}")
            else:
                self._finished.emit(on_done, result)
        if store is not None:
            store.db.conn.close()

    def _open(self) -> ConversationStore | None:
        try:
            return ConversationStore(open_database(self.db_path))
        except (StoreError, OSError) as exc:
            self._open_error = f"Could not open the conversation database {self.db_path}: {exc}"
            self.failed.emit(self._open_error)
            return None

    @Slot(object, object)
    def _deliver(self, callback: Callable[[Any], None] | None, result: Any) -> None:
        try:
            if callback is not None:
                callback(result)
        finally:
            with self._lock:
                self._pending -= 1


def _error_callback(on_error: Callable[[str], None] | None, owner: StoreThread) -> Callable[[str], None]:
    return on_error if on_error is not None else owner.failed.emit
