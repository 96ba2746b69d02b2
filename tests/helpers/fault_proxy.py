"""A fault-injecting HTTP proxy on 127.0.0.1, for testing a client of an OpenAI-compatible server.

The proxy is a real server (``http.server.ThreadingHTTPServer`` on its own thread, a thread per
connection). It forwards each request to an upstream server (the same path on the upstream's host)
and streams the answer back as it comes: a ``text/event-stream`` (or any chunked) answer is sent
on event by event with chunked encoding, so a client sees each event when the upstream sends it,
and a connection closed mid-stream is a truncated body (no final chunk), as a real network fault is.

A test arms faults with method calls (thread-safe, from any thread). Each applies to the next
``times`` requests whose path contains ``path`` (``times=None``: every one, until :meth:`clear`);
faults are used in the order they were armed, one per request (a request uses up the fault even
where it has no effect: a drop on an answer that is not streamed):

* :meth:`drop_after` closes the connection after ``n_events`` data events of a streamed answer;
* :meth:`delay` waits before forwarding the request, and/or before each event;
* :meth:`status` answers at once with an HTTP error and an OpenAI-shaped error body;
* :meth:`garbage_sse` answers 200 ``text/event-stream`` with malformed data lines;
* :meth:`hang` reads the request and never answers (until the proxy stops).

Every request is recorded in :attr:`requests` (method, path, monotonic time, the fault applied),
so a test can check that a client's retries are bounded.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "proxy-connection"}
ERROR_KINDS = {  # status -> (type, code) as OpenAI's API names them
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None), 404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"), 500: ("server_error", None),
    503: ("server_error", "overloaded"),
}
GARBAGE_LINES = (b'data: {"id": "chatcmpl-1", "choices": [{"delta": {"content": "Hel', b"data: not json at all",
                 b'data: {"choices": 7}', b"data: [DONE]")


@dataclass
class Fault:
    kind: str  # "drop", "delay", "status", "garbage", "hang"
    times: int | None  # requests left; None: all
    path: str | None  # applies to paths containing this; None: every path
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    t: float  # time.monotonic() when the proxy read it
    fault: str  # the fault applied, "" for none


def error_body(code: int, message: str | None = None) -> bytes:
    """An error reply as OpenAI's API writes one: ``{"error": {"message", "type", "param", "code"}}``."""
    kind, error_code = ERROR_KINDS.get(code, ("server_error", None))
    text = message or f"fault proxy: HTTP {code} ({http.client.responses.get(code, 'error')})"
    return json.dumps({"error": {"message": text, "type": kind, "param": None, "code": error_code}}).encode()


class FaultProxy:
    """``with FaultProxy("http://127.0.0.1:8000/v1") as proxy:`` then point the client at ``proxy.base_url``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.upstream_path = parts.path.rstrip("/")
        self._faults: list[Fault] = []
        self._seen: list[SeenRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fault-proxy",
                                        daemon=True)

    @property
    def base_url(self) -> str:
        """The proxy's address with the upstream's path (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.upstream_path}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving; a hanging or delayed request is let go (its connection is closed)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    # -- arming faults (any thread) ------------------------------------------------------------------

    def drop_after(self, n_events: int, *, times: int | None = None, path: str | None = None) -> None:
        self._arm(Fault("drop", times, path, {"n_events": n_events}))

    def delay(self, seconds: float = 0.0, *, between_events: float = 0.0, times: int | None = None,
              path: str | None = None) -> None:
        self._arm(Fault("delay", times, path, {"seconds": seconds, "between_events": between_events}))

    def status(self, code: int, retry_after: float | None = None, body: bytes | dict | None = None, *,
               times: int | None = None, path: str | None = None) -> None:
        self._arm(Fault("status", times, path, {"code": code, "retry_after": retry_after, "body": body}))

    def garbage_sse(self, *, times: int | None = None, path: str | None = None) -> None:
        self._arm(Fault("garbage", times, path))

    def hang(self, *, times: int | None = None, path: str | None = None) -> None:
        self._arm(Fault("hang", times, path))

    def clear(self) -> None:
        """Disarm every fault: requests pass through untouched."""
        with self._lock:
            self._faults.clear()

    @property
    def requests(self) -> list[SeenRequest]:
        """Every request seen so far, oldest first (a copy)."""
        with self._lock:
            return list(self._seen)

    def _arm(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take(self, method: str, path: str) -> Fault | None:
        """Record a request and take the fault that applies to it (using up one of its ``times``)."""
        with self._lock:
            fault = next((f for f in self._faults if f.path is None or f.path in path), None)
            if fault is not None and fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
            self._seen.append(SeenRequest(method, path, time.monotonic(), fault.kind if fault else ""))
            return fault


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        owner = proxy
    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked answers, as real servers speak
    owner: FaultProxy

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args) -> None:  # quiet: tests read `requests` instead
        pass

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.owner._take(self.command, self.path)
        kind, options = (fault.kind, fault.options) if fault else ("", {})
        if kind == "hang":
            self.owner._stopping.wait()
            self.close_connection = True
        elif kind == "status":
            self._answer_error(**options)
        elif kind == "garbage":
            self._start_stream(200, {"Content-Type": "text/event-stream"})
            for line in GARBAGE_LINES:
                self._send_chunk(line + b"\n\n")
            self._send_chunk(b"")
        else:
            if self.owner._stopping.wait(options.get("seconds", 0.0)):
                self.close_connection = True
                return
            self._forward(body, drop_after=options.get("n_events"), pause=options.get("between_events", 0.0))

    def _answer_error(self, code: int, retry_after: float | None, body: bytes | dict | None) -> None:
        payload = json.dumps(body).encode() if isinstance(body, dict) else body or error_body(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if retry_after is not None:
            self.send_header("Retry-After", f"{retry_after:g}")
        self.end_headers()
        self.wfile.write(payload)

    def _forward(self, body: bytes, drop_after: int | None, pause: float) -> None:
        owner = self.owner
        upstream = http.client.HTTPConnection(owner.upstream_host, owner.upstream_port, timeout=600)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            try:
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                reply = upstream.getresponse()
            except OSError as exc:  # the upstream is not there: a gateway's answer
                self._answer_error(502, None, error_body(502, f"fault proxy: upstream unreachable: {exc}"))
                return
            passed = {k: v for k, v in reply.getheaders() if k.lower() not in HOP_HEADERS}
            streamed = reply.chunked or "text/event-stream" in (reply.getheader("Content-Type") or "")
            if not streamed:
                payload = reply.read()
                self.send_response(reply.status)
                for name, value in {**passed, "Content-Length": str(len(payload))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
                return
            self._start_stream(reply.status, passed)
            self._relay_events(reply, drop_after, pause)
        except (OSError, http.client.HTTPException):  # either side went away: let the other go too
            self.close_connection = True
        finally:
            upstream.close()

    def _relay_events(self, reply: http.client.HTTPResponse, drop_after: int | None, pause: float) -> None:
        """Forward the stream an event (lines up to a blank line) at a time; stop early to drop."""
        n_data = 0
        event: list[bytes] = []
        for line in iter(reply.readline, b""):
            event.append(line)
            if line.strip():
                continue
            if self.owner._stopping.wait(pause):
                self.close_connection = True
                return
            self._send_chunk(b"".join(event))
            n_data += any(part.startswith(b"data:") for part in event)
            event = []
            if drop_after is not None and n_data >= drop_after:
                self.close_connection = True  # no final chunk: the client sees a truncated body
                return
        if event:
            self._send_chunk(b"".join(event))
        self._send_chunk(b"")

    def _start_stream(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        """One chunk of a chunked body, sent at once; ``b""`` is the final chunk."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
