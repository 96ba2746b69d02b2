"""Where the worker's commands arrive: on the thread that reads them (the pipe's reader in the worker
process, the caller's in an in-process client), never on the engine's.

Most commands are queued for the engine thread (:class:`engine.worker_loop.WorkerLoop`), which runs
them one at a time. A few act here at once: the handshake (the first command must be ``Hello`` with
our protocol version; then this machine's CPU build is checked and ``Ready`` sent), ``Cancel`` (so
it takes effect within one decode step or prefill chunk), ``SetTelemetry``, and ``Shutdown`` (drain:
stop once what is queued has run; abort: cancel the current request and drop the rest). The engine
thread reads :attr:`CommandInbox.queue`, :attr:`~CommandInbox.cancelled` and
:attr:`~CommandInbox.aborting` as they are: no code of this module runs on it.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import queue

from engine import protocol as p
from engine.backends import cpu_check
from engine.backends.cpu_variants import CpuBackendError
from engine.backends.llama_cpp import BACKEND_VERSION, build_info, init_backend
from engine.requests.core import EngineCore
from engine.protocol.devices import device_infos
from engine.devices.probe import DeviceProbe, start_probe
from engine.protocol.request_lifecycle import Requests
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


class CommandInbox:
    """The commands thread's side of the worker: act on a command at once, or queue it."""

    def __init__(self, requests: Requests, core: EngineCore, telemetry: TelemetryThread) -> None:
        self.queue: queue.Queue[p.Command | None] = queue.Queue()  # None: stop
        self.cancelled: set[str] = set()  # request ids
        self.aborting = False  # a Shutdown(abort): the current request stops, nothing else runs
        self._requests, self._core, self._telemetry = requests, core, telemetry
        self._greeted = False

    def submit(self, command: p.Command) -> None:
        if not self._greeted:
            self._greet(command)
        elif isinstance(command, p.Hello):
            self._requests.emit(p.Error(code="bad_message", message="the handshake was already done"))
        elif isinstance(command, p.Cancel):
            self.cancelled.add(command.request_id)
        elif isinstance(command, p.SetTelemetry):
            self._telemetry.set_interval(command.interval_ms)
        elif isinstance(command, p.Shutdown):
            self.stop(abort=command.mode == "abort")
        else:
            self.queue.put(command)

    def report_bad_input(self, code: p.ErrorCode, message: str) -> None:
        self._requests.emit(p.Error(code=code, message=message))

    def refuse(self, rid: str | None, kind: str, problem: str) -> None:
        """Answer a command that cannot be served (a value out of range, a branch built on messages
        never sent) as its request's failure, ended as its kind ends (engine.protocol.request_lifecycle); the
        worker goes on serving."""
        if rid is None:
            self._requests.emit(p.Error(code="bad_request", message=problem))
        else:
            self._requests.fail(kind, rid, "bad_request", problem)

    def stop(self, *, abort: bool) -> None:
        """Drain: finish what is queued, then stop. Abort: cancel the current request, drop the rest."""
        if abort:
            self.aborting = True
            self._drop_queued()
        self.queue.put(None)

    def _greet(self, command: p.Command) -> None:
        if not isinstance(command, p.Hello):
            self._requests.emit(p.Error(code="bad_message", message="the first message must be Hello"))
            return
        if command.protocol_version != p.PROTOCOL_VERSION:
            self._requests.emit(p.Error(
                code="protocol_mismatch",
                message=f"the app speaks protocol {command.protocol_version} but this worker speaks "
                        f"{p.PROTOCOL_VERSION}; reinstall Hearth so both parts come from one version",
            ))
            self.stop(abort=True)
            return
        self._greeted = True
        self._core.configure(command)
        try:  # before anything touches llama.cpp: this machine's CPU build, checked by its canary
            init_backend(self._core.store.data_dir, command.cpu_variant)
        except CpuBackendError as exc:
            self._requests.emit(p.Error(code="cpu_unsupported", message=str(exc)))
            self.stop(abort=True)
            return
        # The process's device probe starts now (its disk cache lives in the data folder);
        # LoadModel waits for it, the handshake does not.
        self._requests.emit(make_ready(start_probe(self._core.store.data_dir)))

    def _drop_queued(self) -> None:
        while True:
            try:
                command = self.queue.get_nowait()
            except queue.Empty:
                return
            if command is not None:  # (None: an earlier stop's sentinel; stop puts one back)
                self._requests.drop(command)
