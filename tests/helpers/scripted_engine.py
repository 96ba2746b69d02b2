"""A small OpenAI-compatible server on 127.0.0.1 that says what a test scripts, for the remote
engine's client and the ``hearth --engine`` commands: hostile model ids, answers and error bodies,
and an answer that never stops.

It is a real server (``http.server`` on its own thread, a thread per connection, HTTP/1.1 with
chunked streams as uvicorn sends them): ``GET /v1/models`` lists :attr:`ScriptedEngine.model_id`;
a ``POST`` to ``/v1/chat/completions`` or ``/v1/completions`` streams :attr:`pieces` as server-sent
events (``delta.content`` or ``text``), then ``finish_reason`` and ``[DONE]`` (``forever``: the pieces
again and again until the client goes away), or answers :attr:`error` (status, body) instead.
:attr:`closed` is set when the client closed a stream the server was still writing, and
:attr:`sent_pieces` counts the pieces written.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedEngine:
    """``with ScriptedEngine(pieces=["a", "b"]) as engine:`` then point a client at ``engine.base_url``."""

    def __init__(self, pieces: list[str] | None = None, *, model_id: str = "scripted", forever: bool = False,
                 error: tuple[int, bytes] | None = None) -> None:
        self.pieces = pieces or ["Hello", " there", "."]
        self.model_id, self.forever, self.error = model_id, forever, error
        self.closed = threading.Event()
        self.sent_pieces = 0
        self.bodies: list[dict] = []  # the JSON of each POST, in order
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(engine: ScriptedEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = engine
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ScriptedEngine

    def log_message(self, format: str, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": self.owner.model_id, "object": "model"}]}))
        else:
            self._send(404, json.dumps({"error": {"message": "not here"}}))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.owner.bodies.append(body)
        if self.owner.error is not None:
            status, payload = self.owner.error
            self._send(status, payload)
            return
        chat = self.path.rstrip("/").endswith("chat/completions")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._stream(chat)
        except OSError:  # the client closed the connection while the answer was being written
            self.owner.closed.set()
            self.close_connection = True

    def _stream(self, chat: bool) -> None:
        owner = self.owner
        while True:
            for piece in owner.pieces:
                self._event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}
                                         if chat else {"index": 0, "text": piece, "finish_reason": None}]})
                owner.sent_pieces += 1
            if not owner.forever:
                break
        self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _event(self, chunk: dict) -> None:
        self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, status: int, payload: str | bytes) -> None:
        data = payload.encode() if isinstance(payload, str) else payload
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
