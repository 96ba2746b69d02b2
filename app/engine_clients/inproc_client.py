"""The engine on a thread of this process, for the CLI, tests and benchmarks (the GUI uses
:class:`app.engine_clients.process_client.ProcessClient`)."""

from __future__ import annotations

import threading
from pathlib import Path

from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineError, checked
from app.engine_clients.outlet import EventOutlet
from engine.worker_loop import WorkerLoop


class InprocClient(EngineClient):
    """The worker loop on a thread of this process. Commands still go through msgpack, so a message
    the process worker would refuse is refused here too."""

    def __init__(self, telemetry_interval_ms: int = 1000, data_dir: Path | None = None) -> None:
        self.telemetry_interval_ms = telemetry_interval_ms
        self.data_dir = data_dir
        self._events = EventOutlet()
        self._loop: WorkerLoop | None = None
        self._thread: threading.Thread | None = None

    def _launch(self) -> None:
        self._loop = WorkerLoop(self._new_outlet().put, self.telemetry_interval_ms)
        self._thread = threading.Thread(target=self._loop.run, name="engine", daemon=True)
        self._thread.start()

    def send(self, command: p.Command) -> None:
        if self._loop is None:
            raise EngineError("not_started", "the engine is not running; start it first")
        self._loop.inbox.submit(checked(command))

    def close(self, mode: str = "drain", timeout: float = 10.0) -> None:
        if self._loop is None:
            return
        self._loop.inbox.stop(abort=mode == "abort")
        if self._thread is not None:
            self._thread.join(timeout)
        self._loop = self._thread = None
