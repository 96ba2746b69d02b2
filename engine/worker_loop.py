"""The worker's serving loop, shared by the real worker process and the in-process client.

Commands arrive through :meth:`WorkerLoop.submit` (from a pipe reader thread, or straight from an
in-process client). Most are queued for the engine core, which runs them one at a time on the
thread that calls :meth:`WorkerLoop.run`. A few act at once: ``Cancel`` (so it takes effect within
one decode step or prefill chunk), ``SetTelemetry``, and ``Shutdown`` in abort mode. The first
command must be ``Hello`` with our protocol version.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import queue
import sys

from engine import protocol as p
from engine.backends import cpu_check
from engine.backends.cpu_variants import CpuBackendError
from engine.backends.faults import raise_if_injected
from engine.backends.llama_cpp import BACKEND_VERSION, build_info, init_backend
from engine.answer_keeper import AnswerKeeper
from engine.core import EngineCore, Emit
from engine.devices.info import device_infos
from engine.devices.probe import DeviceProbe, start_probe
from engine.request_lifecycle import Requests, request_kind
from engine.telemetry.sampler import TelemetryThread


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def make_ready(probe: DeviceProbe | None = None) -> p.Ready:
    """The handshake answer. It never waits for the NPU check: an unfinished one is listed as such."""
    if probe is None:
        probe = start_probe()
    versions = {
        "hearth": _version("hearth"),
        "llama-cpp-python": BACKEND_VERSION.split()[-1],
        "onnxruntime": _version("onnxruntime"),
        "onnxruntime-qnn": _version("onnxruntime-qnn"),
        "python": platform.python_version(),
        "llama.cpp build": build_info(),
    }
    devices = device_infos(probe.cpu, probe.qnn_if_done())
    return p.Ready(protocol_version=p.PROTOCOL_VERSION, versions=versions, devices=devices, pid=os.getpid(),
                   cpu=cpu_backend_info(cpu_check.active()))


def cpu_backend_info(choice: cpu_check.CpuChoice | None) -> p.CpuBackendInfo | None:
    if choice is None:
        return None
    canaries = {name: p.CanaryReport(r.status, r.detail, r.signal, dict(r.types)) for name, r in choice.results.items()}
    return p.CpuBackendInfo(choice.variant, choice.reason, list(choice.features), canaries, choice.cached)


class WorkerLoop:
    def __init__(self, emit: Emit, telemetry_interval_ms: int = 1000) -> None:
        self._queue: queue.Queue[p.Command | None] = queue.Queue()
        self._cancelled: set[str] = set()
        self._aborting = False
        self._greeted = False
        self.core = EngineCore(self.emit, self._is_cancelled)
        # every event goes out through it: each request ends once, and a kept answer is stored first
        self.requests = Requests(emit, AnswerKeeper(self.core.store))
        self.telemetry = TelemetryThread(self.core.live, self.emit, telemetry_interval_ms)

    def emit(self, event: p.Event) -> None:
        self.requests.emit(event)

    def _is_cancelled(self, request_id: str) -> bool:
        return self._aborting or request_id in self._cancelled

    # -- input -----------------------------------------------------------------------------------

    def submit(self, command: p.Command) -> None:
        if not self._greeted:
            self._greet(command)
        elif isinstance(command, p.Hello):
            self.emit(p.Error(code="bad_message", message="the handshake was already done"))
        elif isinstance(command, p.Cancel):
            self._cancelled.add(command.request_id)
        elif isinstance(command, p.SetTelemetry):
            self.telemetry.set_interval(command.interval_ms)
        elif isinstance(command, p.Shutdown):
            self.stop(abort=command.mode == "abort")
        else:
            self._queue.put(command)

    def _greet(self, command: p.Command) -> None:
        if not isinstance(command, p.Hello):
            self.emit(p.Error(code="bad_message", message="the first message must be Hello"))
            return
        if command.protocol_version != p.PROTOCOL_VERSION:
            self.emit(p.Error(
                code="protocol_mismatch",
                message=f"the app speaks protocol {command.protocol_version} but this worker speaks "
                        f"{p.PROTOCOL_VERSION}; reinstall Hearth so both parts come from one version",
            ))
            self.stop(abort=True)
            return
        self._greeted = True
        self.core.configure(command)
        try:  # before anything touches llama.cpp: this machine's CPU build, checked by its canary
            init_backend(self.core.store.data_dir, command.cpu_variant)
        except CpuBackendError as exc:
            self.emit(p.Error(code="cpu_unsupported", message=str(exc)))
            self.stop(abort=True)
            return
        # The process's device probe starts now (its disk cache lives in the data folder);
        # LoadModel waits for it, the handshake does not.
        self.emit(make_ready(start_probe(self.core.store.data_dir)))

    def report_bad_input(self, code: p.ErrorCode, message: str) -> None:
        self.emit(p.Error(code=code, message=message))

    def stop(self, *, abort: bool) -> None:
        """Drain: finish what is queued, then stop. Abort: cancel the current request, drop the rest."""
        if abort:
            self._aborting = True
            self._drop_queued()
        self._queue.put(None)

    def _drop_queued(self) -> None:
        while True:
            try:
                command = self._queue.get_nowait()
            except queue.Empty:
                return
            if command is not None:  # (None: an earlier stop's sentinel; stop puts one back)
                self.requests.drop(command)

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until stopped; the calling thread becomes the engine's only thread."""
        self.telemetry.start()
        try:
            while (command := self._queue.get()) is not None:
                self._handle(command)
        finally:
            self.telemetry.stop()
            self.core.close()

    def _handle(self, command: p.Command) -> None:
        """Run one request; whatever happens in it, it ends with one closing event (engine.request_lifecycle)."""
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
            self._cancelled.discard(rid)
