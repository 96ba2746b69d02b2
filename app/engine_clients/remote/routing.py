"""The window's client: this computer's worker, or a remote engine for as long as one is chosen.

Loading the model reference ``engine:NAME`` switches to the remote engine NAME (its model is the
engine's choice): this computer's model is unloaded to give its memory back, and the worker stays up
for the next switch back, which is the load of any other model. Events of both reach the one queue
the window reads, passed on by each client's own reader (no relay thread); while a remote engine is in use the worker's telemetry is left out (the window
shows the engine's), and the events of the unload this client asked for itself are not passed on.
"""

from __future__ import annotations

from collections.abc import Callable

from engine import protocol as p
from app.engine_clients.client import ClientEvent, EngineClient, EngineError, checked, new_request_id
from app.engine_clients.outlet import EventOutlet
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.spec import REMOTE_PREFIX, RemoteEngine

class RoutingClient(EngineClient):
    def __init__(self, local: EngineClient, resolve: Callable[[str], RemoteEngine]) -> None:
        self.local = local
        self.resolve = resolve  # engine name -> the engine with its key; raises with a sentence if it cannot
        self.remote: RemoteClient | None = None
        self._events = EventOutlet()
        self._own_requests: set[str] = set()  # requests this client sent itself: their answers stay here
        self._telemetry_ms = 0

    def __getattr__(self, name: str):  # pid, process, log_path ... are the worker's
        return getattr(self.__dict__["local"], name)

    @property
    def active_engine(self) -> str:
        """The remote engine in use, "" for this computer."""
        return self.remote.engine.name if self.remote is not None else ""

    # What the handshake tells the worker is the worker client's: set on either, read from it.
    data_dir = property(lambda self: self.local.data_dir)
    snapshot_budget_bytes = property(lambda self: self.local.snapshot_budget_bytes,
                                     lambda self, value: setattr(self.local, "snapshot_budget_bytes", value))
    cpu_variant = property(lambda self: self.local.cpu_variant,
                           lambda self, value: setattr(self.local, "cpu_variant", value))

    def start(self, timeout: float = 60.0, protocol_version: int = p.PROTOCOL_VERSION) -> p.Ready:
        ready = super().start(timeout, protocol_version)
        self.local.ready = ready
        return ready

    def _launch(self) -> None:
        self._new_outlet()
        self.local._launch()
        self._route(self.local)

    def send(self, command: p.Command) -> None:  # checked once, by the client it goes to
        if isinstance(command, p.LoadModel):
            self._load(checked(command))  # here first: a refused load must not unload this computer's model
        elif isinstance(command, p.SetTelemetry):
            self._telemetry_ms = command.interval_ms
            self.local.send(command)
            if self.remote is not None:
                self.remote.send(command)
        elif isinstance(command, (p.Hello, p.Shutdown)):
            self.local.send(command)
        else:
            (self.remote or self.local).send(command)

    def close(self, mode: str = "drain", timeout: float = 10.0) -> None:
        self._drop_remote()
        self.local.close(mode, timeout)

    # ---------------------------------------------------------------------------------------------

    def _load(self, command: p.LoadModel) -> None:
        if not command.model.startswith(REMOTE_PREFIX):
            self._drop_remote()
            self.local.send(command)
            return
        name = command.model.removeprefix(REMOTE_PREFIX)
        try:
            engine = self.resolve(name)
        except Exception as exc:  # noqa: BLE001 - the registry says why in words
            self._events.put(p.Error(code="remote_refused", message=str(exc), request_id=command.request_id))
            return
        self._drop_remote()
        unload = p.UnloadModel(request_id=new_request_id("switch"))
        self._own_requests.add(unload.request_id)
        self.local.send(unload)  # the worker gives its model's memory back while the engine is used
        remote = RemoteClient(engine)
        try:
            remote.start()
        except EngineError as exc:
            self._events.put(p.Error(code="remote_refused", message=str(exc), request_id=command.request_id))
            return
        self.remote = remote
        remote.send(p.SetTelemetry(interval_ms=self._telemetry_ms))
        self._route(remote)
        remote.send(command)

    def _drop_remote(self) -> None:
        remote, self.remote = self.remote, None
        if remote is not None:
            remote.hand_events_to(_dropped)  # what it says while closing is no longer the window's
            remote.close(mode="abort", timeout=5.0)

    def _route(self, client: EngineClient) -> None:
        """Pass ``client``'s events on, on its own reader's thread, into this client's outlet."""
        def forward(event: ClientEvent) -> None:
            if self._passes(client, event):
                self._events.put(event)
        client.hand_events_to(forward)

    def _passes(self, client: EngineClient, event: ClientEvent) -> bool:
        rid = getattr(event, "request_id", None)
        if rid in self._own_requests:
            if not isinstance(event, (p.ModelLoading, p.Telemetry)):
                self._own_requests.discard(rid)
            return False
        if client is self.local and isinstance(event, p.Telemetry) and self.remote is not None:
            return False
        return not (client is not self.local and isinstance(event, p.Ready))


def _dropped(event: ClientEvent) -> None:
    """A sink for the events of an engine no longer in use."""
