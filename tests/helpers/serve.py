"""A real ``hearth serve`` process on 127.0.0.1 (a free port), for tests with the ``openai`` client."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
import urllib.error
import urllib.request
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import openai
import psutil

from app.services.serve_contract import LISTENING
from tests.helpers.cli import ROOT



@dataclass
class HttpReply:
    status_code: int
    headers: dict[str, str]  # names in lower case
    text: str

    def json(self):
        return json.loads(self.text)


def http(method: str, url: str, *, content: bytes | None = None, json_body=None, headers: dict | None = None,
         timeout: float = 60) -> HttpReply:
    """One raw HTTP request (the standard library's), for what the ``openai`` client does not send."""
    if json_body is not None:
        content = json.dumps(json_body).encode()
    request = urllib.request.Request(url, data=content, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return HttpReply(reply.status, _lower(reply.headers), reply.read().decode())
    except urllib.error.HTTPError as error:
        return HttpReply(error.code, _lower(error.headers), error.read().decode())


def _lower(headers) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@dataclass
class RunningServer:
    process: subprocess.Popen
    base_url: str
    log: Path

    def client(self, api_key: str = "not-needed", **options) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, timeout=120, **options)

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def worker(self) -> psutil.Process:
        """The engine worker the server runs (its one child running ``engine.worker``)."""
        for child in psutil.Process(self.process.pid).children(recursive=True):
            if "engine.worker" in " ".join(child.cmdline()):
                return child
        raise AssertionError("the server has no worker")

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not ended within ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def serving(home: Path, *args: str, **env: str) -> Iterator[RunningServer]:
    """A server for the ``with`` block, stopped at its end."""
    server = start_server(home, *args, **env)
    try:
        yield server
    finally:
        server.stop()


def start_server(home: Path, *args: str, timeout: float = 180, **env: str) -> RunningServer:
    """``hearth serve --port 0 ARGS`` with ``home`` as HEARTH_HOME; returns once it listens."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / "serve.log"
    process = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", "0", *args], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=log.open("wb"), text=True, stdin=subprocess.DEVNULL,
                               env={**os.environ, "HEARTH_HOME": str(home), **env})
    deadline = time.monotonic() + timeout
    line = process.stdout.readline()  # the first line says where it listens (or it ended)
    match = LISTENING.search(line)
    if match is None or time.monotonic() > deadline:
        process.kill()
        raise AssertionError(f"hearth serve did not start: {line!r} {log.read_text(errors='replace')[-2000:]}")
    return RunningServer(process, match.group(1), log)
