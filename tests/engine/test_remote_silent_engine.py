"""A remote engine that goes silent in the middle of a request: a stop (Ctrl+C) ends it at once
(issue 50, point 4).

Before, the stop closed the response from another thread, which does not wake a read blocked on a
socket: Ctrl+C was ignored until the 600 s read timeout (at least 90 s in the report). The engine
is a real HTTP server on 127.0.0.1 that answers the model list, then takes a chat request and
either sends its headers and nothing more, or sends nothing at all; the client is the real
:class:`RemoteClient`, and the ``hearth`` command line with a real SIGINT.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.spec import RemoteEngine
from engine import protocol as p
from tests.helpers.cli import hearth, start_hearth

STOP_WITHIN_S = 10  # at once, with room for a loaded machine; the read timeout is 600 s


class SilentEngine:
    """``/v1/models`` answers; a POST is read, then answered with ``headers`` only or with nothing,
    and held until the test ends."""

    def __init__(self, headers: bool) -> None:
        self.headers = headers
        self.reached = threading.Event()  # a POST was read (and its headers sent, if any)
        self.release = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> SilentEngine:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "silent", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if engine.headers:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                engine.reached.set()
                engine.release.wait(120)
                self.close_connection = True

        return Handler


def finished_after_stop(client: RemoteClient, request_id: str) -> tuple[p.Finished | None, list[str], float]:
    """Stop the request; its ``Finished`` (None if none came in time), the errors before it, the seconds taken."""
    client.send(p.Cancel(request_id=request_id))
    started, errors = time.monotonic(), []
    while time.monotonic() - started < STOP_WITHIN_S:
        event = client.next_event(0.1)
        if isinstance(event, p.Error):
            errors.append(event.code)
        if isinstance(event, p.Finished) and event.request_id == request_id:
            return event, errors, time.monotonic() - started
    return None, errors, time.monotonic() - started


@pytest.mark.parametrize("headers", [True, False], ids=["after its headers", "before its headers"])
def test_a_stop_ends_a_request_to_a_silent_engine_at_once(headers):
    with SilentEngine(headers=headers) as engine:
        client = RemoteClient(RemoteEngine(name="silent", url=engine.base_url))
        client.start()
        try:
            client.load_model("engine:silent")
            command = p.Chat(request_id="quiet", messages=[p.WireMessage("user", "hi")], max_tokens=8)
            client.send(command)
            assert engine.reached.wait(30)
            time.sleep(0.3)  # the client is now blocked reading
            finished, errors, took = finished_after_stop(client, "quiet")
            assert finished is not None, f"no end {took:.0f} s after the stop"
            assert finished.finish_reason == "cancelled" and errors == []
            # the client goes on: the next request is sent (and stopped the same way)
            engine.reached.clear()
            client.send(p.Chat(request_id="again", messages=[p.WireMessage("user", "hi")], max_tokens=8))
            assert engine.reached.wait(30)
            finished, errors, _ = finished_after_stop(client, "again")
            assert finished is not None and finished.finish_reason == "cancelled"
        finally:
            client.close(mode="abort", timeout=5)


def test_ctrl_c_ends_hearth_generate_on_a_silent_engine_at_once(hearth_home):
    with SilentEngine(headers=True) as engine:
        added = hearth("engines", "add", "silent", "--url", engine.base_url, timeout=60)
        assert added.returncode == 0, added.stderr
        process = start_hearth("generate", "--engine", "silent", "--max-tokens", "8", "hi")
        try:
            assert engine.reached.wait(60), "the request never reached the engine"
            time.sleep(0.5)
            process.send_signal(signal.SIGINT)
            started = time.monotonic()
            process.wait(STOP_WITHIN_S + 20)  # (a hang fails here: TimeoutExpired)
            took = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr = process.stderr.read()
        assert took < STOP_WITHIN_S, f"Ctrl+C took {took:.0f} s"
        assert "Traceback" not in stderr
