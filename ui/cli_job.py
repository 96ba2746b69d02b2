"""Running one ``hearth`` command in a child process and reading its JSON lines.

Model downloads, imports and removals run as ``python -m app models ...`` in a child process
rather than in the window's process: the GUI never loads the hub client (an import-linter contract
forbids it), a crash or a stuck connection cannot freeze the window, and cancelling is just
terminating the child (which keeps what it downloaded, so the next try resumes). QProcess delivers
the child's output through the event loop, so nothing here blocks.
"""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

from engine.protocol.child_command import CLI, module_command

STOP_GRACE_MS = 5_000


class CliJob(QObject):
    """``CliJob(["models", "pull", "--json", ref])``; :meth:`start`, then listen."""

    line = Signal(dict)  # each JSON object the command prints on its own line
    finished = Signal(int, str)  # exit code (-1: crashed or failed to start), the last error line

    def __init__(self, argv: list[str], parent: QObject | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__(parent)
        self.argv = argv
        self.process = QProcess(self)
        environment = QProcessEnvironment.systemEnvironment()
        for name, value in (env or {}).items():
            environment.insert(name, value)
        self.process.setProcessEnvironment(environment)
        self.process.readyReadStandardOutput.connect(self._read_lines)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(self._failed_to_start)
        self._buffer = b""
        self._done = False

    def start(self) -> None:
        program, *arguments = module_command(CLI)
        self.process.start(program, [*arguments, *self.argv])

    def stop(self) -> None:
        """Ask the command to stop (SIGTERM: a download keeps its partial file); kill it if it lingers."""
        if self.process.state() != QProcess.ProcessState.NotRunning:
            self.process.terminate()
            if not self.process.waitForFinished(STOP_GRACE_MS):
                self.process.kill()

    @property
    def running(self) -> bool:
        return self.process.state() != QProcess.ProcessState.NotRunning

    def _read_lines(self) -> None:
        self._buffer += bytes(self.process.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue  # not one of ours (a library printing); ignore
            if isinstance(obj, dict):
                self.line.emit(obj)

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self._read_lines()
        error = bytes(self.process.readAllStandardError()).decode("utf-8", "replace").strip().splitlines()
        message = error[-1].removeprefix("hearth: error: ") if error else ""
        self._emit_finished(code if status == QProcess.ExitStatus.NormalExit else -1, message)

    def _failed_to_start(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._emit_finished(-1, f"could not start {sys.executable}: {self.process.errorString()}")

    def _emit_finished(self, code: int, message: str) -> None:
        if not self._done:
            self._done = True
            self.finished.emit(code, message)
