"""The worker's engine thread, shared by the real worker process and the in-process client.

Commands arrive at the loop's :class:`~engine.requests.command_inbox.CommandInbox` (:attr:`WorkerLoop.inbox`)
on the thread that reads them; those it queues run here, one at a time, on the thread that calls
:meth:`WorkerLoop.run`: the engine's only thread. Whatever happens in a request, it ends with one
closing event (engine.protocol.request_lifecycle).
"""

from __future__ import annotations

import sys

from engine import protocol as p
from engine.requests.answer_keeper import AnswerKeeper
from engine.backends.faults import raise_if_injected
from engine.requests.command_inbox import CommandInbox
from engine.requests.core import EngineCore, Emit
from engine.protocol.request_lifecycle import Requests, request_kind
from engine.telemetry.sampler import TelemetryThread


class WorkerLoop:
    def __init__(self, emit: Emit, telemetry_interval_ms: int = 1000) -> None:
        self.core = EngineCore(self.emit, self._is_cancelled)
        # every event goes out through it: each request ends once, and a kept answer is stored first
        self.requests = Requests(emit, AnswerKeeper(self.core.store))
        self.telemetry = TelemetryThread(self.core.live, self.emit, telemetry_interval_ms)
        self.inbox = CommandInbox(self.requests, self.core, self.telemetry)

    def emit(self, event: p.Event) -> None:
        self.requests.emit(event)

    def _is_cancelled(self, request_id: str) -> bool:
        return self.inbox.aborting or request_id in self.inbox.cancelled

    def run(self) -> None:
        """Serve until stopped; the calling thread becomes the engine's only thread."""
        self.telemetry.start()
        try:
            while (command := self.inbox.queue.get()) is not None:
                self._handle(command)
        finally:
            self.telemetry.stop()
            self.core.close()

    def _handle(self, command: p.Command) -> None:
        """Run one request; whatever happens in it, it ends with one closing event (engine.protocol.request_lifecycle)."""
        rid = command.request_id
        self.requests.begin(command)
        try:
            raise_if_injected(request_kind(command))
            self.core.handle(command)
        except Exception as exc:  # a bug, not bad input: report it and keep serving
            print(f"hearth worker: internal error: {exc!r}", file=sys.stderr)
            self.emit(p.Error(code="internal", message=f"internal error: {exc!r}", request_id=rid))
        finally:
            self.requests.end(command, "cancelled" if self._is_cancelled(rid) else "error")
            self.inbox.cancelled.discard(rid)
