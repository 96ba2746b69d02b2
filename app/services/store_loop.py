"""The store thread's side of the window's database work: open the file, run jobs in order, report.

:class:`ui.store_thread.StoreThread` is the window's side: it queues jobs and hands results to their
callbacks on the GUI thread. On the store thread run only this loop and the jobs it is given (a
turn's job also sends its command through the engine bridge, a thread-safe write into the pipe). The
loop owns the connection; everything it has to say goes out through :class:`StoreReports`, whose
calls cross to the GUI thread (the window wires them to queued Qt signals).

The file may be damaged, read-only or on a full disk (:mod:`model_store.storage_problems`). A
read-only file is opened for reading (``read_only`` says so); damage, found when the file is opened
or by any job, is said once through ``damaged``, and nothing is written to the file after that; a
:data:`RECOVER` job copies what is readable into a new file (:mod:`model_store.recovery`) and goes
on with it.
"""

from __future__ import annotations

import queue
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_store.after_crash import open_conversation_store
from model_store.conversations import ConversationStore
from model_store.db import problem_of, read_only_problem
from model_store.recovery import recover_database
from model_store.storage_problems import DatabaseDamaged, StoreError

Job = Callable[[ConversationStore], Any]
Callback = Callable[[Any], None]
STOP = object()  # put on the queue: finish the jobs before it, close the connection
RECOVER = object()  # as a job: close the damaged file, recover it, go on with the new one


@dataclass(frozen=True)
class StoreReports:
    """How the loop speaks to the window; each call must be safe from the store thread."""

    deliver: Callable[[Callback | None, Any], None]  # (callback, result): exactly one per job
    failed: Callable[[str], None]  # a message for the user, when a job has no on_error
    damaged: Callable[[DatabaseDamaged], None]  # said once
    read_only: Callable[[object], None]  # the file was opened for reading only


class StoreLoop:
    """Runs ``(job, on_done, on_error)`` items from ``jobs`` until :data:`STOP`."""

    def __init__(self, db_path: Path, jobs: queue.Queue, reports: StoreReports) -> None:
        self.db_path = db_path
        self._jobs = jobs
        self._reports = reports
        self._open_error: str | None = None
        self._said_damaged = False

    def run(self) -> None:
        """The store thread's body: open the database, then run every job in order."""
        store = self._open()
        while (item := self._jobs.get()) is not STOP:
            job, on_done, on_error = item
            if job is RECOVER:
                store = self._recover(store, on_done, on_error)
            elif store is None:
                self._fail(on_error, self._open_error, quiet=self._said_damaged)
            else:
                self._run_job(store, job, on_done, on_error)
        if store is not None:
            store.db.conn.close()

    def _run_job(self, store: ConversationStore, job: Job, on_done: Callback | None,
                 on_error: Callable[[str], None] | None) -> None:
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
            self._reports.deliver(on_done, result)

    def _fail(self, on_error: Callable[[str], None] | None, message: str | None, *, quiet: bool = False) -> None:
        """``on_error(message)`` on the GUI thread; without one, ``failed``, unless ``quiet`` (the damage
        is said once, by ``damaged``). Exactly one delivery either way: it ends the job."""
        if on_error is None and quiet:
            self._reports.deliver(None, None)
        else:
            self._reports.deliver(on_error or self._reports.failed, message)

    def _open(self) -> ConversationStore | None:
        try:
            store = open_conversation_store(self.db_path, read_only_ok=True)
        except DatabaseDamaged as exc:
            self._open_error = f"the conversation database {self.db_path} is damaged; recover it first"
            self._say_damaged(exc)
            return None
        except (StoreError, OSError) as exc:
            self._open_error = f"Could not open the conversation database {self.db_path}: {exc}"
            self._reports.failed(self._open_error)
            return None
        self._open_error = None
        read_only = read_only_problem(store.db)
        if read_only is not None:
            self._reports.read_only(read_only)
        return store

    def _say_damaged(self, problem: DatabaseDamaged) -> None:
        if not self._said_damaged:
            self._said_damaged = True
            self._reports.damaged(problem)

    def _recover(self, store: ConversationStore | None, on_done: Callback | None,
                 on_error: Callable[[str], None] | None) -> ConversationStore | None:
        if store is not None:
            store.db.conn.close()
        try:
            recovery = recover_database(self.db_path)
        except (StoreError, OSError, sqlite3.Error) as exc:
            self._reports.deliver(on_error or self._reports.failed,
                                  f"Could not recover {self.db_path}: {exc}; the damaged file was left where it is.")
            return self._open()
        self._said_damaged = False
        store = self._open()
        self._reports.deliver(on_done, recovery)
        return store
