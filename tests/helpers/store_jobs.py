"""The GUI store thread's part, for tests of the Qt-free flows (app.services.turn_flow, document_flow).

:class:`StoreJobs` runs the jobs a flow submits on a real SQLite store only when the test says:
:meth:`~StoreJobs.run_jobs` as the store's thread runs them, :meth:`~StoreJobs.deliver` their
results as the window's thread later takes them, so every step can be seen between two others. A
job that raises hands its message to ``on_error``, as :class:`ui.store_thread.StoreThread` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from model_store.conversations import ConversationStore


@dataclass
class StoreJobs:
    store: ConversationStore
    jobs: list[tuple[Callable, Callable | None, Callable | None]] = field(default_factory=list)
    results: list[Callable[[], None]] = field(default_factory=list)
    fail_with: str = ""  # the next job fails with this message instead of running (a full disk, say)

    def submit(self, job, on_done=None, on_error=None) -> None:
        self.jobs.append((job, on_done, on_error))

    def run_jobs(self) -> None:
        while self.jobs:
            job, on_done, on_error = self.jobs.pop(0)
            if self.fail_with:
                message, self.fail_with = self.fail_with, ""
                self._hand_back(on_error, message)
                continue
            try:
                result = job(self.store)
            except Exception as error:
                self._hand_back(on_error, str(error))
                continue
            if on_done is not None:
                self.results.append(lambda on_done=on_done, result=result: on_done(result))

    def deliver(self) -> None:
        while self.results:
            self.results.pop(0)()

    def run(self) -> None:
        while self.jobs or self.results:
            self.run_jobs()
            self.deliver()

    def _hand_back(self, on_error: Callable[[str], None] | None, message: str) -> None:
        if on_error is not None:
            self.results.append(lambda: on_error(message))
