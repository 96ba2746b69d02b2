"""llama-cpp-python's own OpenAI-compatible server (``llama_cpp.server``) on 127.0.0.1: a real remote
engine for tests and the baseline of benchmarks, started one way for all of them.

Hearth's llama-cpp-python is built without a CPU backend linked in: Hearth loads, per machine, the
fastest of its CPU builds whose canary passed here (:mod:`engine.backends.cpu_check`), and a
default build may not run on every CPU anyway. So the server is not run as ``python -m
llama_cpp.server`` but through :data:`LAUNCHER`, which loads that build first (the one
``HEARTH_CPU_VARIANT`` names, else the check's choice, cached in ``HEARTH_CPU_CHECK_FILE``) and then
runs the server's ``__main__`` with the same arguments.

The defaults suit a chat client: flash attention on (Hearth always uses it), ``logits_all`` off
(its default computes the output layer for every prompt token, which no chat client needs). The
server picks no port itself (``--port 0`` is not reported), so a free one is chosen here and the
start is tried again if another process took it first. :func:`llama_server` is the ``with`` form;
tests make it a fixture (``tests/engine/conftest.py``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.backends import cpu_check
from engine.backends.base import default_threads
from engine.models.model_files import DEFAULT_MODEL, resolve_model_ref
from tests.helpers.serve import stop_process

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = """
from engine.backends.cpu_check import ensure_cpu_backend
ensure_cpu_backend()  # the CPU build named by HEARTH_CPU_VARIANT (or chosen here), before llama.cpp initialises
import runpy
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
START_TIMEOUT_S = 300
PORT_ATTEMPTS = 3


class ServerDidNotStart(RuntimeError):
    """The server ended or did not answer in time; the message carries the end of its log."""


@dataclass
class LlamaServer:
    process: subprocess.Popen
    base_url: str  # http://127.0.0.1:PORT/v1
    model: str  # the model's id as /v1/models lists it
    log: Path
    api_key: str = ""  # "" when the server asks for none

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        stop_process(self.process)


def pin_cpu_build(work: Path) -> str:
    """Choose Hearth's CPU build now (the canary's result cached in ``work``) and pin it, through
    the environment, for every server started from this process afterwards (benchmarks compare
    servers on one build). Returns its name."""
    os.environ[cpu_check.CHECK_FILE_ENV] = str(work / cpu_check.CHECK_FILE)
    variant = cpu_check.ensure_cpu_backend().variant
    if variant != "built-in":
        os.environ[cpu_check.VARIANT_ENV] = variant
    return variant


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_flags(model: Path, port: int, context: int, threads: int, api_key: str, **extra) -> list[str]:
    """The command line of ``llama_cpp.server`` (its flags are its settings' field names)."""
    flags = {"model": model, "n_ctx": context, "n_batch": 512, "n_ubatch": 512, "n_threads": threads,
             "n_threads_batch": threads, "flash_attn": "true", "logits_all": "false", "verbose": "false",
             "host": "127.0.0.1", "port": port, **({"api_key": api_key} if api_key else {}), **extra}
    return [part for name, value in flags.items() for part in (f"--{name}", str(value))]


def start_llama_server(model: Path | None = None, *, context: int = 2048, threads: int | None = None,
                       api_key: str = "", log_dir: Path | None = None, env: dict[str, str] | None = None,
                       preexec_fn: Callable[[], None] | None = None, timeout: float = START_TIMEOUT_S,
                       **extra: object) -> LlamaServer:
    """Start the server (SmolLM2 as Hearth loads it, unless ``model``) and return once ``GET /v1/models`` answers.

    ``extra`` are more ``llama_cpp.server`` settings (``model_alias="smollm2"``, ``n_batch=256``).
    ``preexec_fn`` runs in the child before it starts (pinning it to some cores, say). Raises
    :class:`ServerDidNotStart`.
    """
    model = model or resolve_model_ref(DEFAULT_MODEL)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="hearth-llama-server-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), child_env.get("PYTHONPATH")]))
    for _ in range(PORT_ATTEMPTS):  # another process may take the free port before the server binds it
        port = free_port()
        log = log_dir / f"llama-server-{port}.log"
        args = server_flags(model, port, context, threads or default_threads(), api_key, **extra)
        with log.open("wb") as out:  # the child keeps its own copy of the handle
            process = subprocess.Popen([sys.executable, "-c", LAUNCHER, *args], cwd=ROOT, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env,
                                       preexec_fn=preexec_fn)
        base_url = f"http://127.0.0.1:{port}/v1"
        model_id = _wait_for_models(process, base_url, api_key, timeout)
        if model_id is not None:
            return LlamaServer(process, base_url, model_id, log, api_key)
        stop_process(process, grace_s=5)
        said = log.read_text(errors="replace")
        if "address already in use" not in said.lower():
            break
    raise ServerDidNotStart(f"llama_cpp.server did not start (exit {process.poll()}):\n{said[-3000:]}")


def _wait_for_models(process: subprocess.Popen, base_url: str, api_key: str, timeout: float) -> str | None:
    """The first model id the server lists, once it answers; None if it ended or the time ran out."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            request = urllib.request.Request(f"{base_url}/models", headers=headers)
            with urllib.request.urlopen(request, timeout=5) as reply:
                return json.load(reply)["data"][0]["id"]
        except OSError:
            time.sleep(0.3)
    return None


@contextmanager
def llama_server(model: Path | None = None, **options) -> Iterator[LlamaServer]:
    """A server for the ``with`` block (options as :func:`start_llama_server`), stopped at its end."""
    server = start_llama_server(model, **options)
    try:
        yield server
    finally:
        server.stop()
