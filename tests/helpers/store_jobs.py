"""The GUI's store thread and engine bridge, for tests of the Qt-free flows (app.services.turn_flow, document_flow).

:class:`StoreJobs` runs the jobs a flow submits on a real SQLite store only when the test says:
:meth:`~StoreJobs.run_jobs` as the store's thread runs them, :meth:`~StoreJobs.deliver` their
results as the window's thread later takes them, so every step can be seen between two others. A
job that raises hands its message to ``on_error``, as :class:`ui.store_thread.StoreThread` does.
:class:`SentCommands` is the bridge's ``send``: it keeps what was sent, or says the engine is down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine import protocol as p
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


@dataclass
class SentCommands:
    up: bool = True  # False: the engine is down, nothing is sent
    sent: list[p.Command] = field(default_factory=list)

    def send(self, command: p.Command) -> bool:
        if self.up:
            self.sent.append(command)
        return self.up

    def last(self, kind: type) -> p.Command:
        return [command for command in self.sent if isinstance(command, kind)][-1]
