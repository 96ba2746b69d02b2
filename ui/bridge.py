"""The GUI's one link to the engine: owns the client, turns its events into Qt signals.

The client's own reader thread hands each event to the bridge, which emits it as a signal; the
receivers live on the GUI thread, so Qt queues the calls and the GUI never waits on the engine (one
thread from the pipe to the window: :mod:`app.engine_clients.outlet`). A supervising thread only
starts the worker and waits for its death. Sending is a write into a pipe, which does not block on
the engine's work.

When the worker dies the bridge says so once (:attr:`EngineBridge.died`), starts a fresh worker by
itself and reports :attr:`EngineBridge.ready` again; the window then reloads the model and reopens
the conversation. A worker that keeps dying (``max_restarts`` within ``restart_window_s``) is left
down with a message rather than restarted forever.

A worker that dies before it ever decoded (while loading the model, or reading the first input)
twice in a row is not restarted at all: another restart would only load the same model with the
same CPU build and crash again. :attr:`EngineBridge.crash_loop` says so, with what it was doing,
and :meth:`EngineBridge.retry` starts it again when the user chose what to change (a safer CPU
build, another model).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal

from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineDead, EngineError


class EngineBridge(QObject):
    ready = Signal(object)  # p.Ready: the worker is up (first start or after a restart)
    event = Signal(object)  # every p.Event the worker sends
    died = Signal(object)  # EngineDead: the worker stopped without being asked to
    gave_up = Signal(str)  # the worker could not be (re)started; the message says why
    crash_loop = Signal(object, str)  # (EngineDead, "loading the model" | "reading the input"): left down
    _relayed = Signal(object)  # always queued: an event put on the GUI thread (an answer at once) waits its turn too

    def __init__(self, make_client: Callable[[], EngineClient], *, max_restarts: int = 3,
                 restart_window_s: float = 60.0, telemetry_interval_ms: int = 500) -> None:
        super().__init__()
        self._relayed.connect(self.event.emit, Qt.ConnectionType.QueuedConnection)
        self.client = make_client()
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.telemetry_interval_ms = telemetry_interval_ms
        self.alive = False
        self._stopping = threading.Event()
        self._restarts: list[float] = []
        self._thread: threading.Thread | None = None
        self.early_deaths = 0  # deaths in a row before the worker ever decoded
        self.held = False  # left down after a crash loop, until retry()
        self._pending_load: str | None = None
        self._pending_reads: set[str] = set()
        self._decoded = False
        self._death: EngineDead | None = None
        self._died_now = threading.Event()  # set by the reader when the worker dies

    def start(self, first: bool = True) -> None:
        """Start the worker and the reader thread; returns at once."""
        self._thread = threading.Thread(target=self._run, args=(first,), name="engine-supervisor", daemon=True)
        self._thread.start()

    def retry(self, cpu_variant: str | None = None) -> None:
        """Start a worker left down after a crash loop, with another CPU build if asked."""
        if not self.held:
            return
        self.held = False
        if cpu_variant:
            self.client.cpu_variant = cpu_variant
        self.early_deaths = 0
        self._restarts.clear()
        self.start(first=False)

    def send(self, command: p.Command) -> bool:
        """Queue a command for the worker; False (and nothing sent) while it is down."""
        if not self.alive:
            return False
        if isinstance(command, p.LoadModel):
            self._pending_load = command.request_id
        elif isinstance(command, (*p.ANSWERS, p.ReadDocument)):
            self._pending_reads.add(command.request_id)
        try:
            self.client.send(command)
        except EngineError:
            return False
        return True

    def _track(self, event: p.Event) -> None:
        """Whether the worker has decoded yet, and which load or read is in flight."""
        rid = getattr(event, "request_id", None)
        if isinstance(event, (p.ModelLoaded, p.Error)) and rid == self._pending_load:
            self._pending_load = None
        elif _shows_a_decode(event) and not self._decoded:
            self._decoded = True
            self.early_deaths = 0
        elif p.ends_request(event):
            self._pending_reads.discard(rid)

    def _early_death(self) -> str | None:
        """What the worker was doing if it died before ever decoding, else None."""
        if self._pending_load is not None:
            return "loading the model"
        if self._pending_reads and not self._decoded:
            return "reading the input"
        return None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the worker (cancelling any answer) and the reader thread."""
        self._stopping.set()
        self.alive = False
        self._died_now.set()
        self.client.close(mode="abort", timeout=timeout)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, first: bool) -> None:
        while not self._stopping.is_set():
            if not self._start_worker(first):
                return
            first = False
            dead = self._wait_for_death()
            if dead is None:
                return
            self.alive = False
            doing = self._early_death()
            self.early_deaths = self.early_deaths + 1 if doing else 0
            self.held = doing is not None and self.early_deaths >= 2  # before died: its receivers may ask
            self.died.emit(dead)
            if self.held:
                self.crash_loop.emit(dead, doing)
                return
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
        self._pending_load, self._decoded = None, False
        self._pending_reads.clear()
        self._death = None
        self._died_now.clear()
        self.alive = True
        self.client.send(p.SetTelemetry(interval_ms=self.telemetry_interval_ms))
        self.ready.emit(ready)
        self.client.hand_events_to(self._relay)  # the events since the handshake first
        return True

    def _relay(self, event: p.Event | EngineDead) -> None:
        """On the client's reader thread: an event becomes a signal; the worker's death wakes the supervisor."""
        if isinstance(event, EngineDead):
            self._death = event
            self._died_now.set()
            return
        self._track(event)
        self._relayed.emit(event)

    def _wait_for_death(self) -> EngineDead | None:
        """The worker's death, or None when the bridge stops first."""
        self._died_now.wait()
        return None if self._stopping.is_set() else self._death

    def _too_many_restarts(self) -> bool:
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < self.restart_window_s] + [now]
        return len(self._restarts) > self.max_restarts


def _shows_a_decode(event: p.Event) -> bool:
    """A token, or an exact prompt count (a chunk was decoded). An estimated count is only a timer's
    heartbeat while the first chunk is read: it proves nothing ran, so a crash after it is early."""
    return isinstance(event, p.TokenDelta) or (isinstance(event, p.PromptProgress) and not event.estimated)
