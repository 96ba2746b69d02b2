"""Database work off the GUI thread.

The worker process writes snapshots into the same SQLite file, so any write from the GUI can wait
on its lock (up to the busy timeout), and reading a long conversation takes time. Every store call
therefore runs on one background thread that owns its own connection; the result comes back to the
GUI thread as a queued signal and is handed to the caller's callback there. Jobs run in the order
they were submitted, so a write followed by a read sees the write.

The file may be damaged, read-only or on a full disk (:mod:`model_store.storage_problems`). A
read-only file is opened for reading (:attr:`StoreThread.read_only` says so); damage, found when
the file is opened or by any job, is said once through :attr:`StoreThread.damaged`, and nothing is
written to the file after that; :meth:`StoreThread.recover` copies what is readable into a new file
(:mod:`model_store.recovery`) and goes on with it.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from model_store.after_crash import open_conversation_store
from model_store.conversations import ConversationStore
from model_store.db import problem_of, read_only_problem
from model_store.recovery import recover_database
from model_store.storage_problems import DatabaseDamaged, StoreError

Job = Callable[[ConversationStore], Any]
_STOP = object()
_RECOVER = object()


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
        self._thread = threading.Thread(target=self._run, name="store", daemon=True)
        self._open_error: str | None = None
        self._said_damaged = False

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
        self.submit(_RECOVER, on_done, on_error)

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
            if job is _RECOVER:
                store = self._recover(store, on_done, on_error)
                continue
            if store is None:
                self._fail(on_error, self._open_error, quiet=self._said_damaged)
                continue
            try:
                result = job(store)
            except (StoreError, OSError, ValueError, sqlite3.Error) as exc:
                problem = problem_of(store.db, exc)
                if isinstance(problem, DatabaseDamaged):
                    self._say_damaged(problem)
                self._fail(on_error, str(problem or exc), quiet=isinstance(problem, DatabaseDamaged))
            except Exception as exc:  # a bug: report it, keep the thread (and every later job) alive
                self._fail(on_error, f"internal error in the store: {exc!r}")
            else:
                self._finished.emit(on_done, result)
        if store is not None:
            store.db.conn.close()

    def _fail(self, on_error: Callable[[str], None] | None, message: str | None, *, quiet: bool = False) -> None:
        """``on_error(message)`` on the GUI thread; without one, :attr:`failed`, unless ``quiet`` (the
        damage is said once, by :attr:`damaged`). Exactly one delivery either way: it ends the job."""
        if on_error is None and quiet:
            self._finished.emit(None, None)
        else:
            self._finished.emit(_error_callback(on_error, self), message)

    def _open(self) -> ConversationStore | None:
        try:
            store = open_conversation_store(self.db_path, read_only_ok=True)
        except DatabaseDamaged as exc:
            self._open_error = f"the conversation database {self.db_path} is damaged; recover it first"
            self._say_damaged(exc)
            return None
        except (StoreError, OSError) as exc:
            self._open_error = f"Could not open the conversation database {self.db_path}: {exc}"
            self.failed.emit(self._open_error)
            return None
        self._open_error = None
        read_only = read_only_problem(store.db)
        if read_only is not None:
            self.read_only.emit(read_only)
        return store

    def _say_damaged(self, problem: DatabaseDamaged) -> None:
        if not self._said_damaged:
            self._said_damaged = True
            self.damaged.emit(problem)

    def _recover(self, store: ConversationStore | None, on_done, on_error) -> ConversationStore | None:
        if store is not None:
            store.db.conn.close()
        try:
            recovery = recover_database(self.db_path)
        except (StoreError, OSError, sqlite3.Error) as exc:
            self._finished.emit(_error_callback(on_error, self), f"Could not recover {self.db_path}: {exc}; the "
                                                                 "damaged file was left where it is.")
            return self._open()
        self._said_damaged = False
        store = self._open()
        self._finished.emit(on_done, recovery)
        return store

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
