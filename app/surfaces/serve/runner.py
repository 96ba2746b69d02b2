"""One engine worker serving HTTP requests one at a time, in the order they came (FIFO).

The HTTP side (asyncio) hands a :class:`Job` to :meth:`EngineRunner.submit`; the runner's thread
prepares its command (for a chat, by storing its messages: the store's connection lives on this
thread), sends it to the worker and passes each of its events back to the job's asyncio queue. A
job whose client went away is cancelled at once (``Cancel`` within a decode step), a queued one
before it starts. When the worker dies, the request in flight gets the death and the runner starts
a new worker and loads the model again before the next job; while it does, jobs wait.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import protocol as p
from app.engine_clients.client import ClientEvent, EngineClient, EngineDead, EngineError, InvalidRequest
from engine.protocol.deaths import engine_dead

POLL_S = 0.05  # how often a running job's cancellation is looked at
WAIT_LIMIT_S = 300.0  # in the queue; then the request is answered 503
RUN_LIMIT_S = 600.0  # once started; then it is cancelled and answered 504
RESTART_TRIES = 3


class QueueFull(Exception):
    pass


class WaitedTooLong(Exception):
    pass


class SwitchFailed(Exception):
    """The model a request asked for (``--allow-switch``) did not load; the message says why."""


@dataclass
class Job:
    """One request for the engine. ``prepare`` runs on the runner's thread and returns the command;
    ``finish`` (also there) gets every event the request had, after the last."""

    prepare: Callable[[], p.Command]
    finish: Callable[[list[ClientEvent]], None] = lambda events: None
    loop: asyncio.AbstractEventLoop | None = None
    events: asyncio.Queue | None = None
    wait_limit_s: float = WAIT_LIMIT_S
    run_limit_s: float = RUN_LIMIT_S
    cancelled: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    request_id: str = ""
    model: str = ""  # the served model's id the request names ("" : whichever is loaded)
    ran_out: bool = False  # cancelled for running past run_limit_s
    left_out: int = 0  # a chat's messages the stored cut already leaves out of what the model reads (prepare sets it)

    def deliver(self, item: ClientEvent | BaseException | None) -> None:
        """Hand an event (None: the end; an exception: the job failed) to the waiting request."""
        if self.loop is not None and self.events is not None:
            self.loop.call_soon_threadsafe(self.events.put_nowait, item)


class EngineRunner:
    def __init__(self, client: EngineClient, load: Callable[[EngineClient, str], p.ModelLoaded], model: str,
                 max_queue: int) -> None:
        self.client = client
        self.load = load  # (worker, model id): loads that model into a (new) worker
        self.model = model  # the id of the model the worker has
        self.max_queue = max_queue
        self.loaded: p.ModelLoaded | None = None
        self.up = threading.Event()  # a worker with the model is there
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._waiting = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="engine-runner", daemon=True)
        self.on_restart: Callable[[str], None] | None = None  # told why the worker was restarted

    def start(self) -> p.ModelLoaded:
        """Start the worker, load the model (raises :class:`EngineError`), then serve jobs."""
        self.client.start()
        self.client.send(p.SetTelemetry(interval_ms=0))
        self.loaded = self.load(self.client, self.model)
        self.up.set()
        self._thread.start()
        return self.loaded

    @property
    def waiting(self) -> int:
        return self._waiting

    def submit(self, job: Job) -> None:
        """Queue ``job``; raises :class:`QueueFull` when ``max_queue`` jobs already wait."""
        with self._lock:
            if self._waiting >= self.max_queue:
                raise QueueFull
            self._waiting += 1
        self._jobs.put(job)

    def cancel(self, job: Job) -> None:
        job.cancelled.set()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout=10)
        self.client.close(mode="abort")

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                self._waiting -= 1
            if job.cancelled.is_set():
                job.deliver(None)
                continue
            if time.monotonic() - job.queued_at > job.wait_limit_s:
                job.deliver(WaitedTooLong(f"the request waited {job.wait_limit_s:g} s for the engine"))
                continue
            job.started_at = time.monotonic()
            try:
                self._run(job)
            except BaseException as exc:  # the request gets the failure; the runner goes on
                job.deliver(exc)

    def _run(self, job: Job) -> None:
        if (gone := self._worker_gone()) is not None:  # it died while idle: nothing was lost yet
            self._restart(gone)
        if job.model and job.model != self.model:
            self._switch(job.model)
        command = job.prepare()
        job.request_id = command.request_id
        events: list[ClientEvent] = []
        try:
            self._follow(job, command, events)
        except InvalidRequest as exc:  # refused before it was sent: the worker is fine and keeps the model
            self._refuse(job, command, exc, events)
        except EngineError as exc:  # the worker died as the request was sent to it
            dead = exc.dead or EngineDead(exit_code=None, message=str(exc))
            events.append(dead)
            job.deliver(dead)
        job.finish(events)
        job.deliver(None)
        if isinstance(events[-1], EngineDead):
            self._restart(events[-1])

    @staticmethod
    def _refuse(job: Job, command: p.Command, refused: InvalidRequest, events: list[ClientEvent]) -> None:
        """A command with a value out of range ends as the worker would end it (an Error, then Finished)."""
        for event in p.failure_events(command.__struct_config__.tag, command.request_id, "bad_request", str(refused)):
            events.append(event)
            job.deliver(event)

    def _follow(self, job: Job, command: p.Command, events: list[ClientEvent]) -> None:
        """Send the request and pass its events to the job until the one that ends it (or a death)."""
        self.client.send(command)
        cancel_sent = False
        deadline = job.started_at + job.run_limit_s
        while True:
            if not cancel_sent and (job.cancelled.is_set() or time.monotonic() > deadline):
                job.ran_out = not job.cancelled.is_set()
                self.client.send(p.Cancel(request_id=command.request_id))
                cancel_sent = True
            event = self.client.next_event(POLL_S)
            if event is None or (not isinstance(event, EngineDead)
                                 and getattr(event, "request_id", None) != command.request_id):
                continue
            events.append(event)
            job.deliver(event)
            if isinstance(event, EngineDead) or p.ends_request(event):
                return

    def _worker_gone(self) -> EngineDead | None:
        """How the worker ended, if it has (its death may still wait in the event queue)."""
        process = getattr(self.client, "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return None
        while (event := self.client.next_event(0)) is not None:  # drop what the dead worker left
            if isinstance(event, EngineDead):
                return event
        return engine_dead(code)

    def _switch(self, model: str) -> None:
        """Load another installed model for this job (and those after it); raises :class:`SwitchFailed`."""
        try:
            self.loaded = self.load(self.client, model)
        except EngineError as exc:
            raise SwitchFailed(f"the model '{model}' did not load: {exc}") from None
        self.model = model

    def _restart(self, dead: EngineDead) -> None:
        """A new worker with the model, before the next job (tried a few times)."""
        self.up.clear()
        for attempt in range(RESTART_TRIES):
            try:
                self.client.restart()
                self.client.send(p.SetTelemetry(interval_ms=0))
                self.loaded = self.load(self.client, self.model)
            except EngineError as exc:
                if self.on_restart is not None:
                    self.on_restart(f"restart {attempt + 1} failed: {exc}")
                continue
            self.up.set()
            if self.on_restart is not None:
                self.on_restart(f"the worker died ({dead.message}); a new one serves the model")
            return
