"""Running the real ``hearth`` command line from tests, with the test's ``HEARTH_HOME`` (the autouse
fixture puts it in the environment), and watching it while it runs.

:func:`hearth` and :func:`start_hearth` run ``python -m app`` from this checkout;
:func:`installed_hearth` runs the installed entry point (:data:`HEARTH`), as a user types it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
HEARTH = Path(sys.executable).with_name("hearth")  # the installed entry point


def command(*args: str, prefix: tuple[str, ...] = ()) -> list[str]:
    return [*prefix, sys.executable, "-m", "app", *args]


def hearth(*args: str, timeout: float = 300, prefix: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    """Run one command to its end."""
    return subprocess.run(command(*args, prefix=prefix), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def start_hearth(*args: str, **env: str) -> subprocess.Popen:
    """Start one command; the caller waits for it."""
    return subprocess.Popen(command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def installed_hearth(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """The installed command, with this test's HEARTH_HOME (and the session's CPU check)."""
    return subprocess.run([str(HEARTH), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one line a failed command prints on stderr (no traceback, exit status 1)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hearth: error: "), lines[0]
    return lines[0]


def read_until(stream, enough: int, timeout: float) -> bytes:
    """At least ``enough`` bytes of ``stream`` (a pipe), within ``timeout`` seconds."""
    seen, deadline = b"", time.monotonic() + timeout
    while len(seen) < enough:
        assert time.monotonic() < deadline, f"only {seen!r} within {timeout} s"
        chunk = stream.read1(4096)
        assert chunk, f"the output ended early: {seen!r}"
        seen += chunk
    return seen


def as_in_a_terminal() -> None:
    """Ctrl+C as a terminal delivers it: a job started in the background by a non-interactive shell
    (as CI may be) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_worker(pid: int, timeout: float) -> None:
    """Wait until the command ``pid`` has started its worker process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any("engine.worker" in " ".join(c.cmdline()) for c in psutil.Process(pid).children()):
            return
        time.sleep(0.1)
    raise AssertionError("the command never started its worker")


def wait_for_the_model_in_its_worker(pid: int, timeout: float) -> None:
    """Wait until the worker of command ``pid`` has the model file mapped (llama.cpp maps the GGUF
    when it loads it), so a request sent after it is answered rather than waiting for the load."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children():
            try:
                if "engine.worker" in " ".join(child.cmdline()) and any(
                        m.path.endswith(".gguf") for m in child.memory_maps(grouped=True)):
                    return
            except psutil.Error:
                pass
        time.sleep(0.2)
    raise AssertionError("the worker never loaded the model")


def _worker_of(pid: int) -> psutil.Process:
    for child in psutil.Process(pid).children():
        if "engine.worker" in " ".join(child.cmdline()):
            return child
    raise AssertionError(f"command {pid} has no worker process")


def wait_for_the_worker_to_compute(pid: int, cpu_seconds: float, timeout: float) -> None:
    """Wait until the worker of command ``pid`` has spent ``cpu_seconds`` more of CPU time than it
    had when called: the observable sign of an answer under way when the command prints nothing
    until the end (``--json``). CPU time, not wall time, so a busy machine only makes it slower."""
    worker = _worker_of(pid)
    start = sum(worker.cpu_times()[:2])
    deadline = time.monotonic() + timeout
    while sum(worker.cpu_times()[:2]) - start < cpu_seconds:
        assert time.monotonic() < deadline, f"the worker did not compute {cpu_seconds} s within {timeout} s"
        time.sleep(0.05)


def press_ctrl_c_during(argv: list[str], wait_until_writing: Callable[[subprocess.Popen], bytes],
                        ) -> tuple[subprocess.Popen, bytes, bytes]:
    """Run the installed ``hearth`` with ``argv`` as a terminal would, press Ctrl+C (SIGINT to its
    whole process group) once ``wait_until_writing(process)`` returns (what it read of stdout), and
    collect the rest: (the ended process, all of stdout, stderr)."""
    process = subprocess.Popen([str(HEARTH), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=as_in_a_terminal)
    try:
        seen = wait_until_writing(process)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait()
    return process, seen + out, err
