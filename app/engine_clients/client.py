"""How the app talks to the engine: one :class:`EngineClient` interface, two ways to run it.

:class:`app.engine_clients.inproc_client.InprocClient` runs the worker loop on a thread in this process (CLI, tests, benchmarks);
:class:`app.engine_clients.process_client.ProcessClient` runs it in a child process (the GUI), so a crash there
cannot take the window down. Both speak the same messages and behave the same. Events are read
with :meth:`EngineClient.next_event`; the blocking helpers (:meth:`~EngineClient.load_model`,
:meth:`~EngineClient.stream`) are for callers that do one thing at a time.

Failures come in two kinds, as in vLLM: an :class:`~engine.protocol.Error` with a request id ends
that request only; :class:`EngineDead` (the worker exited or was killed) is reported once, and
:meth:`EngineClient.restart` brings up a fresh worker.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path


from engine import protocol as p
from app.engine_clients.outlet import EventOutlet
from engine.protocol.deaths import CRASH_WORDS, EngineDead  # noqa: F401 (the worker's death is one of a client's events)
from model_store.db import StoreError, database_path, open_database
from model_store.fit import DEFAULT_BUDGET_PERCENT


class EngineError(Exception):
    """The engine refused or failed a request; ``code`` is the protocol's error code."""

    def __init__(self, code: str, message: str, dead: EngineDead | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.dead = dead  # set when the engine died


class InvalidRequest(EngineError):
    """A command refused before it was sent: a value outside its field's range. ``invalid`` names the
    field, the range and the value (the worker would have refused it with the same words)."""

    def __init__(self, invalid: p.InvalidCommand) -> None:
        super().__init__("bad_request", str(invalid))
        self.invalid = invalid


def checked(command: p.Command) -> p.Command:
    """``command`` as the engine will read it, or :class:`InvalidRequest`: every client sends through this."""
    try:
        return p.check_command(command)
    except p.InvalidCommand as exc:
        raise InvalidRequest(exc) from None


ClientEvent = p.Event | EngineDead
_ids = itertools.count(1)


def prepare_database(data_dir: Path) -> None:
    """Create or migrate the conversation database in ``data_dir``, as the app does before a worker
    starts. A database that cannot be opened is left for the worker to report on its first use."""
    try:
        open_database(database_path(data_dir)).close()
    except StoreError:
        pass


class CtrlC:
    """Within the block, the first Ctrl+C (SIGINT) sets :attr:`pressed` instead of raising; the
    second raises ``KeyboardInterrupt`` as usual. Outside the main thread (where Python never
    delivers signals) it does nothing."""

    POLL_S = 0.2  # how often a follower looks at the flag

    def __init__(self) -> None:
        self.pressed = False
        self._previous = None

    def __enter__(self) -> CtrlC:
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # (a background job: Ctrl+C is not for it)
        if threading.current_thread() is threading.main_thread() and not ignored:
            self._previous = signal.signal(signal.SIGINT, self._pressed)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _pressed(self, signum, frame) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True


def new_request_id(prefix: str = "r") -> str:
    return f"{prefix}{next(_ids)}-{time.monotonic_ns() % 10**9}"


class EngineClient(ABC):
    """Start, send commands, read events, close; the same for every way of running the engine."""

    on_other_event: Callable[[ClientEvent], None] | None = None  # telemetry etc. seen by blocking helpers
    data_dir: Path | None = None  # where the engine keeps conversation snapshots
    snapshot_budget_bytes: int = 4 * 1024**3
    cpu_variant: str = "auto"  # which CPU build of llama.cpp the engine loads (engine.backends.cpu_check)
    ready: p.Ready | None = None  # the last handshake's answer: versions, devices, the CPU build in use
    context: p.ContextReport | None = None  # the loaded model's context, as last loaded or grown by the helpers
    on_context_grown: Callable[[p.ContextGrown], None] | None = None  # told by the blocking helpers

    @abstractmethod
    def _launch(self) -> None: ...

    @abstractmethod
    def send(self, command: p.Command) -> None:
        """Queue a command for the engine; never blocks on the engine's work. Raises
        :class:`InvalidRequest` (checked by :func:`checked`) for a value out of its field's range."""

    _events: EventOutlet  # filled by the implementation's reader; a fresh one per launch

    def _new_outlet(self) -> EventOutlet:
        """A fresh outlet for a new launch; the last one's late events are dropped."""
        self._events.close()
        self._events = EventOutlet()
        return self._events

    def next_event(self, timeout: float | None = None) -> ClientEvent | None:
        """The next event, or None after ``timeout`` seconds (until :meth:`hand_events_to`)."""
        return self._events.get(timeout)

    def hand_events_to(self, sink: Callable[[ClientEvent], None]) -> None:
        """From now on, hand each event (and the engine's death) to ``sink`` on the thread that reads it,
        instead of queueing it for :meth:`next_event`; until the next launch, which queues again for
        its handshake (:mod:`app.engine_clients.outlet`)."""
        self._events.hand_to(sink)

    @abstractmethod
    def close(self, mode: str = "drain", timeout: float = 10.0) -> None: ...

    def start(self, timeout: float = 60.0, protocol_version: int = p.PROTOCOL_VERSION) -> p.Ready:
        """Bring the data folder's database up to date (the worker never migrates it), launch the
        engine and do the handshake; raises :class:`EngineError` if it refuses."""
        if self.data_dir is not None:
            prepare_database(self.data_dir)
        self._launch()
        self.ready = None
        self.send(p.Hello(protocol_version=protocol_version, user_dir=str(self.data_dir or ""),
                          snapshot_budget_bytes=self.snapshot_budget_bytes, cpu_variant=self.cpu_variant))
        deadline = time.monotonic() + timeout
        while (event := self.next_event(max(0.0, deadline - time.monotonic()))) is not None:
            if isinstance(event, p.Ready):
                self.ready = event
                return event
            if isinstance(event, p.Error):
                raise EngineError(event.code, event.message)
            if isinstance(event, EngineDead):
                raise EngineError("engine_dead", event.message, event)
        raise EngineError("timeout", f"the engine did not answer within {timeout:.0f} s")

    def restart(self, timeout: float = 60.0) -> p.Ready:
        self.close(mode="abort", timeout=2.0)
        return self.start(timeout)

    # -- blocking helpers ------------------------------------------------------------------------

    def stream(self, command: p.Command, timeout: float | None = None) -> Iterator[ClientEvent]:
        """Send a request and yield its events up to and including the one that ends it."""
        rid = command.request_id
        self.send(command)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            event = self.next_event(wait)
            if event is None:
                raise EngineError("timeout", f"no answer to request {rid} within {timeout} s")
            if isinstance(event, EngineDead):
                yield event
                return
            if getattr(event, "request_id", None) != rid:
                if self.on_other_event is not None:
                    self.on_other_event(event)
                continue
            self._note_context(event)
            yield event
            if p.ends_request(event):
                return

    def _note_context(self, event: ClientEvent) -> None:
        if isinstance(event, p.ModelLoaded):
            self.context = event.context
        elif isinstance(event, p.ContextGrown):
            self.context = event.context
            if self.on_context_grown is not None:
                self.on_context_grown(event)

    def follow(self, command: p.Command, on_event: Callable[[ClientEvent], None]) -> bool:
        """Send a request and hand each of its events (or the engine's death) to ``on_event`` until
        the one that ends it. Ctrl+C cancels the request and keeps following it to its end, so what
        it wrote before the stop still arrives (a ``Finished`` with ``cancelled``); a second Ctrl+C
        raises ``KeyboardInterrupt``. Returns True if Ctrl+C stopped it.

        While it follows, Ctrl+C only sets a flag (see :class:`CtrlC`): a ``KeyboardInterrupt``
        raised between taking an event and handing it on would lose that event's text.
        """
        rid = command.request_id
        self.send(command)
        with CtrlC() as ctrl_c:
            cancelled = False
            while True:
                if ctrl_c.pressed and not cancelled:
                    cancelled = True
                    self.send(p.Cancel(request_id=rid))
                event = self.next_event(CtrlC.POLL_S)
                if event is None:
                    continue
                if not isinstance(event, EngineDead) and getattr(event, "request_id", None) != rid:
                    if self.on_other_event is not None:
                        self.on_other_event(event)
                    continue
                self._note_context(event)
                on_event(event)
                if isinstance(event, EngineDead) or p.ends_request(event):
                    return ctrl_c.pressed

    def load_model(self, model: str, *, n_ctx: int = 0, n_threads: int = 0, draft_max: int = 4, draft_paths: int = 1,
                   device_policy: str = "auto", calibration: dict | None = None, kv_type: str = "f16",
                   memory_percent: int = DEFAULT_BUDGET_PERCENT, name: str = "",
                   timeout: float | None = None) -> p.ModelLoaded:
        """Load ``model``; ``n_ctx`` 0 is the automatic context (see p.LoadModel); ``name``: what the app
        calls it."""
        command = p.LoadModel(request_id=new_request_id("load"), model=model, n_ctx=n_ctx, n_threads=n_threads,
                              draft_max=draft_max, draft_paths=draft_paths, device_policy=device_policy,
                              calibration=calibration,
                              kv_type=kv_type, memory_percent=memory_percent, name=name)
        for event in self.stream(command, timeout):
            if isinstance(event, p.ModelLoaded):
                return event
            _raise_if_failure(event)
        raise EngineError("internal", "the engine ended the load without an answer")


def _raise_if_failure(event: ClientEvent) -> None:
    if isinstance(event, p.Error):
        raise EngineError(event.code, event.message)
    if isinstance(event, EngineDead):
        raise EngineError("engine_dead", event.message, event)
