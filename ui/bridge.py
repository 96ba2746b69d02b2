"""The GUI's one link to the engine: owns the client, turns its events into Qt signals.

A plain reader thread waits on the client's event queue and emits each event as a signal; the
receivers live on the GUI thread, so Qt queues the calls and the GUI never waits on the engine.
Sending is a write into a pipe, which does not block on the engine's work.

When the worker dies the bridge says so once (:attr:`EngineBridge.died`), starts a fresh worker by
itself and reports :attr:`EngineBridge.ready` again; the window then reloads the model and reopens
the conversation. A worker that keeps dying (``max_restarts`` within ``restart_window_s``) is left
down with a message rather than restarted forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from engine import protocol as p
from engine.client import EngineClient, EngineDead, EngineError


class EngineBridge(QObject):
    ready = Signal(object)  # p.Ready: the worker is up (first start or after a restart)
    event = Signal(object)  # every p.Event the worker sends
    died = Signal(object)  # EngineDead: the worker stopped without being asked to
    gave_up = Signal(str)  # the worker could not be (re)started; the message says why

    def __init__(self, make_client: Callable[[], EngineClient], *, max_restarts: int = 3,
                 restart_window_s: float = 60.0, telemetry_interval_ms: int = 500) -> None:
        super().__init__()
        self.client = make_client()
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.telemetry_interval_ms = telemetry_interval_ms
        self.alive = False
        self._stopping = threading.Event()
        self._restarts: list[float] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker and the reader thread; returns at once."""
        self._thread = threading.Thread(target=self._run, name="engine-bridge", daemon=True)
        self._thread.start()

    def send(self, command: p.Command) -> bool:
        """Queue a command for the worker; False (and nothing sent) while it is down."""
        if not self.alive:
            return False
        try:
            self.client.send(command)
        except EngineError:
            return False
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the worker (cancelling any answer) and the reader thread."""
        self._stopping.set()
        self.alive = False
        self.client.close(mode="abort", timeout=timeout)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        first = True
        while not self._stopping.is_set():
            if not self._start_worker(first):
                return
            first = False
            dead = self._pump()
            if dead is None:
                return
            self.alive = False
            self.died.emit(dead)
            if self._too_many_restarts():
                self.gave_up.emit(f"{dead.message}, again; the engine stopped {len(self._restarts)} times in a "
                                  "minute, so Hearth is not restarting it. Choose another model, then restart.")
                return

    def _start_worker(self, first: bool) -> bool:
        try:
            ready = self.client.start() if first else self.client.restart()
        except (EngineError, OSError) as exc:  # refused, or the worker process could not even be started
            if not self._stopping.is_set():
                self.gave_up.emit(f"The engine could not start: {exc}")
            return False
        if self._stopping.is_set():
            return False
        self.alive = True
        self.client.send(p.SetTelemetry(interval_ms=self.telemetry_interval_ms))
        self.ready.emit(ready)
        return True

    def _pump(self) -> EngineDead | None:
        """Relay events until the worker dies (returned) or the bridge stops (None)."""
        while not self._stopping.is_set():
            event = self.client.next_event(0.2)
            if event is None:
                continue
            if isinstance(event, EngineDead):
                return None if self._stopping.is_set() else event
            self.event.emit(event)
        return None

    def _too_many_restarts(self) -> bool:
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < self.restart_window_s] + [now]
        return len(self._restarts) > self.max_restarts
