"""The local API server the app runs for other programs: ``hearth serve`` in a child process.

The server has a worker (and a copy of the model) of its own, so the window and the API never wait
on each other's engine, and a crash of one leaves the other running. QProcess delivers the child's
output through the event loop: the first stdout line says where it listens, and every request it
answers or refuses is one stderr line starting with ``hearth serve: ``, which is what the count
counts. The key goes to the child in its environment (``HEARTH_API_KEY``), never on its command
line, which other users of the computer can read.

:meth:`ApiServerProcess.apply` runs what the settings ask for: it starts, stops or restarts the
server when what it serves changes (on/off, port, network, key, model, or a setting the model is
loaded with). A restart waits for the old process to end, so the new one finds its port free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from app.services.serve_contract import CANNOT_LISTEN, KEY_ENV, LISTENING, PARENT_ENV, REQUEST_PREFIX
from app.services.settings import Settings
from engine.protocol.child_command import CLI, module_command

ERROR_PREFIX = "hearth: error: "
LOCAL_HOST, ANY_HOST = "127.0.0.1", "0.0.0.0"
STOP_GRACE_MS = 5_000


@dataclass(frozen=True)
class ServerPlan:
    """What one run of the server serves, and how; equal plans need no restart."""

    port: int
    lan: bool
    key: str
    model: str
    loads_with: str  # the settings the server loads the model with, as one comparable text

    @classmethod
    def from_settings(cls, s: Settings) -> ServerPlan | None:
        if not s.api_server:
            return None
        loads_with = repr((sorted(s.contexts.items()), s.kv_cache_8bit, s.memory_budget_percent,
                           s.device_calibration, s.snapshot_budget_gib))
        return cls(s.api_server_port, s.api_server_lan, s.api_server_key, s.model, loads_with)

    def arguments(self) -> list[str]:
        host = ANY_HOST if self.lan else LOCAL_HOST
        return ["serve", "--port", str(self.port), "--host", host, "--model", self.model]

    @property
    def local_url(self) -> str:
        return local_url(self.port)


def local_url(port: int) -> str:
    """The address programs on this computer use."""
    return f"http://{LOCAL_HOST}:{port}/v1"


def failure_text(line: str, port: int, was_listening: bool) -> str:
    """The server's last error line, said for the window's user."""
    detail = line.removeprefix(ERROR_PREFIX).strip()
    if not was_listening and detail.startswith(CANNOT_LISTEN):
        if "in use" in detail:
            return (f"The local API server could not start: port {port} is already in use by another program. "
                    "Choose another port in Settings, or close that program.")
        return f"The local API server could not start: port {port} cannot be used. Choose another port in Settings."
    start = "The local API server stopped unexpectedly" if was_listening else "The local API server could not start"
    if not detail:
        return f"{start}."
    return f"{start}: {detail}" + ("" if detail.endswith(".") else ".")


class ApiServerProcess(QObject):
    """One ``hearth serve`` child at a time, run as the settings say."""

    listening = Signal(str)  # the address programs on this computer use
    requests_changed = Signal(int)  # requests answered or refused since it started
    failed = Signal(str)  # why it could not start, or why it stopped, in a sentence
    stopped = Signal()  # it is not running any more (stopped, or ended)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.plan: ServerPlan | None = None  # what runs, or ran last
        self.process: QProcess | None = None
        self.url: str | None = None  # set once it listens
        self.requests = 0
        self._next: ServerPlan | None = None  # to start once the current process has ended
        self._stopping = False
        self._out = self._err = b""
        self._last_error = ""

    @property
    def running(self) -> bool:
        return self.process is not None

    def pid(self) -> int | None:
        """The server process's id while it runs."""
        if self.process is None:
            return None
        return int(self.process.processId()) or None

    def apply(self, settings: Settings) -> None:
        """Start, stop or restart the server when what the settings ask of it changed."""
        plan = ServerPlan.from_settings(settings)
        if plan != self.plan:
            self.restart(plan)

    def restart(self, plan: ServerPlan | None) -> None:
        """End the running server (if any), then start ``plan`` (None: leave it stopped)."""
        self.plan, self._next = plan, plan
        if self.process is None:
            self._start_next()
        elif not self._stopping:
            self._stopping = True
            process = self.process
            process.terminate()
            QTimer.singleShot(STOP_GRACE_MS, self, lambda: self._kill_lingering(process))

    def stop(self) -> None:
        """Stop the server and wait for it to end (when the app quits): SIGTERM, then a kill."""
        self.plan = self._next = None
        process = self.process
        if process is None:
            return
        self._stopping = True
        process.terminate()
        if not process.waitForFinished(STOP_GRACE_MS):
            process.kill()
            process.waitForFinished(STOP_GRACE_MS)

    # -- one process --------------------------------------------------------------------------

    def _start_next(self) -> None:
        plan, self._next = self._next, None
        if plan is None:
            return
        self.url, self.requests, self._stopping = None, 0, False
        self._out = self._err = b""
        self._last_error = ""
        process = QProcess(self)
        process.setProcessEnvironment(_environment(plan.key))
        process.readyReadStandardOutput.connect(self._read_stdout)
        process.readyReadStandardError.connect(self._read_stderr)
        process.finished.connect(self._ended)
        process.errorOccurred.connect(self._failed_to_start)
        self.process = process
        program, *arguments = module_command(CLI)
        process.start(program, [*arguments, *plan.arguments()])

    def _kill_lingering(self, process: QProcess) -> None:
        if process is self.process:  # still the one asked to stop (a newer one has its own grace)
            process.kill()

    def _read_stdout(self) -> None:
        self._out += bytes(self.process.readAllStandardOutput())
        *lines, self._out = self._out.split(b"\n")
        for line in lines:
            match = LISTENING.search(line.decode("utf-8", "replace"))
            if match and self.url is None:
                self.url = local_url(int(match.group(3)))
                self.listening.emit(self.url)

    def _read_stderr(self) -> None:
        self._err += bytes(self.process.readAllStandardError())
        *lines, self._err = self._err.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(REQUEST_PREFIX):
                self.requests += 1
                self.requests_changed.emit(self.requests)
            elif line.startswith(ERROR_PREFIX) or (line and not self._last_error.startswith(ERROR_PREFIX)):
                self._last_error = line  # the server's own error line outranks a library's chatter

    def _ended(self, code: int = 0, status: QProcess.ExitStatus = QProcess.ExitStatus.NormalExit) -> None:
        process, expected = self.process, self._stopping
        if process is None:
            return
        self._read_stderr()
        self.process, self._stopping = None, False
        process.deleteLater()
        if not expected:
            line = self._last_error or (f"it ended with code {code}" if status == QProcess.ExitStatus.NormalExit
                                        else "it crashed")
            self.failed.emit(failure_text(line, self.plan.port if self.plan else 0, self.url is not None))
        self.url = None
        self.stopped.emit()
        self._start_next()

    def _failed_to_start(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            self._last_error = self.process.errorString()
            self._ended(-1)


def _environment(key: str) -> QProcessEnvironment:
    environment = QProcessEnvironment.systemEnvironment()
    environment.remove(KEY_ENV)  # the settings' key, or none: not one the app happened to inherit
    if key:
        environment.insert(KEY_ENV, key)
    environment.insert(PARENT_ENV, str(os.getpid()))  # if the app dies, the server ends too
    return environment
