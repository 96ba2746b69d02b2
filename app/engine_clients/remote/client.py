"""A remote engine behind the :class:`~app.engine_clients.client.EngineClient` interface.

Commands are answered one at a time, in order, on a thread of this process (an HTTP stream needs no
process of its own: nothing native runs here). The handshake and the model list come first
(``Hello`` → ``Ready`` at once, ``LoadModel`` → the server's ``/v1/models``); answers stream as
``TokenDelta`` events; ``Cancel`` closes the stream at once. What the engine cannot do on a server
is answered as such, not faked: no snapshots (``ConversationOpened`` and ``DocumentRead`` say none
were used), no drafting, no device calibration.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from engine import protocol as p
from app.engine_clients.client import EngineClient, EngineError, checked
from app.engine_clients.outlet import EventOutlet
from app.engine_clients.remote.answer import AnswerStream
from app.engine_clients.remote.api import OpenAIApi
from app.engine_clients.remote.errors import RemoteError
from app.engine_clients.remote.loading import model_loaded, pick_model
from app.engine_clients.remote.measure import TokenCounter, document_room, text_measured
from app.engine_clients.remote.retry import RetryPolicy, default_policy
from app.engine_clients.remote.spec import RemoteEngine
from app.engine_clients.remote.telemetry import remote_telemetry
from engine.protocol.request_lifecycle import Requests

NO_SNAPSHOTS = "a remote engine keeps no state on this computer: the conversation is sent with each message"


class RemoteClient(EngineClient):
    def __init__(self, engine: RemoteEngine, *, policy: RetryPolicy | None = None) -> None:
        self.engine = engine
        self.policy = policy or default_policy()
        self._events = EventOutlet()
        self._commands: queue.Queue[p.Command | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._api: OpenAIApi | None = None
        self._counter: TokenCounter | None = None
        self._lock = threading.Lock()
        self._answering: tuple[str, AnswerStream] | None = None
        self._cancelled: set[str] = set()
        # the end-of-request rule, as the worker applies it (engine.protocol.request_lifecycle)
        self._requests = Requests(lambda event: self._events.put(event))
        self.model = ""  # the server's model id, once loaded
        self.n_ctx = 0
        self.telemetry_interval_ms = 0
        self._last_telemetry = 0.0

    def _launch(self) -> None:
        self._new_outlet()
        self._commands = queue.Queue()
        self._api = OpenAIApi(self.engine)
        self._thread = threading.Thread(target=self._serve, name=f"remote-{self.engine.name}", daemon=True)
        self._thread.start()

    def send(self, command: p.Command) -> None:
        if self._thread is None:
            raise EngineError("not_started", "the engine is not running; start it first")
        command = checked(command)
        match command:
            case p.Hello():
                self._events.put(self._ready())
            case p.Cancel():
                self._cancel(command.request_id)
            case p.SetTelemetry():
                self.telemetry_interval_ms = command.interval_ms
            case p.Ping():
                self._events.put(p.Pong(request_id=command.request_id))
            case p.Shutdown():
                self._commands.put(None)
            case _:
                self._commands.put(command)

    def close(self, mode: str = "drain", timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        if mode == "abort":
            with self._lock:
                answering = self._answering
            if answering is not None:
                answering[1].stop()
        self._commands.put(None)
        self._thread.join(timeout)
        if self._api is not None:
            self._api.close()
        self._thread = self._api = None

    # -- the command thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        """Each command's request is opened, run, and closed by the rule the worker follows: whatever
        ended it without its closing event (a failure, a bug) gets one (``Requests.end``)."""
        while (command := self._commands.get()) is not None:
            if command.request_id in self._cancelled:
                self._cancelled.discard(command.request_id)
                self._requests.drop(command)
                continue
            self._requests.begin(command)
            try:
                self._handle(command)
            except RemoteError as error:
                self._emit(p.Error(code=error.code, message=str(error), request_id=command.request_id))
            except Exception as exc:  # noqa: BLE001 - one request fails, the client goes on
                self._emit(p.Error(code="internal", message=f"the remote engine client failed: {exc}",
                                   request_id=command.request_id))
            finally:
                self._requests.end(command)

    def _emit(self, event: p.Event) -> None:
        self._requests.emit(event)

    def _handle(self, command: p.Command) -> None:
        match command:
            case p.LoadModel():
                self._load(command)
            case p.UnloadModel():
                self.model = ""
                self._emit(p.ModelUnloaded(request_id=command.request_id))
            case p.Complete() | p.Chat() | p.AnswerTurn():
                self._answer(command)
            case p.MeasureText():
                self._emit(text_measured(self._loaded_counter(), command, self.n_ctx))
            case p.ReadDocument():
                self._emit(self._document_read(command))
            case p.OpenConversation():
                self._emit(p.ConversationOpened(request_id=command.request_id,
                                                snapshot=p.SnapshotReport(notes=[NO_SNAPSHOTS])))
            case p.Calibrate():
                raise RemoteError("remote_refused", "calibration measures this computer's devices; switch to this "
                                                    "computer's engine to calibrate")

    def _document_read(self, command: p.ReadDocument) -> p.DocumentRead:
        """A remote engine reads nothing ahead: the document is measured, and sent with each question."""
        room = document_room(self._loaded_counter(), command, self.n_ctx)
        if room.tokens > room.budget_tokens:
            return p.DocumentRead(request_id=command.request_id, finish_reason="too_long", tokens=0,
                                  timings=p.Timings(), room=room)
        return p.DocumentRead(request_id=command.request_id, finish_reason="stop", tokens=room.tokens,
                              timings=p.Timings(), snapshot=p.SnapshotReport(notes=[NO_SNAPSHOTS]))

    def _ready(self) -> p.Ready:
        device = p.DeviceInfo(kind="remote", name=self.engine.name, detail=self.engine.url)
        return p.Ready(protocol_version=p.PROTOCOL_VERSION, versions={"remote": self.engine.url}, devices=[device],
                       pid=os.getpid())

    def _load(self, command: p.LoadModel) -> None:
        self._emit(p.ModelLoading(request_id=command.request_id, phase="check", fraction=0.0))
        model, context = pick_model(self.engine, self._api.models(), command.model)
        self.model, self.n_ctx = model, context
        self._counter = TokenCounter(self._api, model)
        self._emit(model_loaded(self.engine, command.request_id, model, context))

    def _loaded_counter(self) -> TokenCounter:
        if self._counter is None:
            raise RemoteError("remote_refused", f"no model is chosen on the engine {self.engine.name}; load one first")
        return self._counter

    def _answer(self, command: p.Answer) -> None:
        if not self.model:
            raise RemoteError("no_model", f"no model is chosen on the engine {self.engine.name}; load one first")
        stream = AnswerStream(self._api, self.model, self.policy, self._emit, on_progress=self._progress)
        with self._lock:
            self._answering = (command.request_id, stream)
        try:
            stream.run(command)
        finally:
            with self._lock:
                self._answering = None
            self._telemetry(stream, force=True)

    def _cancel(self, request_id: str) -> None:
        with self._lock:
            answering = self._answering
            if answering is not None and answering[0] == request_id:
                answering[1].stop()
            else:
                self._cancelled.add(request_id)

    def _progress(self, stream: AnswerStream) -> None:
        self._telemetry(stream)

    def _telemetry(self, stream: AnswerStream, force: bool = False) -> None:
        interval = self.telemetry_interval_ms / 1000
        now = time.monotonic()
        if interval <= 0 or (not force and now - self._last_telemetry < interval):
            return
        self._last_telemetry = now
        self._emit(remote_telemetry(self.engine.name, stream, idle=force))
