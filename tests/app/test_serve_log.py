"""``hearth serve``'s log: one line per request, never a traceback (issue 32, point 4).

A real server (embedded SmolLM2) is sent what clients do wrong: going away in the middle of a
streamed answer (the real ``httpx2`` client, closed early), of a whole answer and of a body; a body
that is not JSON, one too large (declared and sent), a request that is not HTTP, a broken chunked
body. Before, a client that left mid-body put Starlette's ``ClientDisconnect`` traceback in the log,
and a stream the client left wrote no line at all. The server's stderr is read after each case.
"""

from __future__ import annotations

import json
import socket
import time

import httpx2
import pytest

from app.surfaces.serve.connections import LIMITS_TEST_ENV
from app.services.serve_contract import REQUEST_PREFIX
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]

LONG = {"model": "default", "messages": [{"role": "user", "content": "Write a long story about a fox."}],
        "max_tokens": 400, "temperature": 0}
JSON_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Connection: close\r\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-log-home"), **{LIMITS_TEST_ENV: "2,2,4,64"})
    yield running
    running.stop()


def connect(server) -> socket.socket:
    host, port = server.root.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def send_and_leave(server, data: bytes, stay_s: float = 0.5) -> None:
    connection = connect(server)
    connection.sendall(data)
    time.sleep(stay_s)
    connection.close()


def send_and_read(server, data: bytes) -> bytes:
    connection = connect(server)
    connection.sendall(data)
    reply = b""
    try:
        while chunk := connection.recv(65536):
            reply += chunk
    except ConnectionResetError:
        pass
    connection.close()
    return reply


def with_length(body: bytes) -> bytes:
    return JSON_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def leave_a_stream(server) -> None:
    with httpx2.stream("POST", f"{server.base_url}/chat/completions", json={**LONG, "stream": True},
                       timeout=60) as reply:
        for number, _ in enumerate(reply.iter_lines()):
            if number >= 4:
                break


CASES = {
    "a streamed answer left after its first chunks": leave_a_stream,
    "a whole answer left while it is written": lambda s: send_and_leave(s, with_length(json.dumps(LONG).encode()), 1.0),
    "a body left half sent": lambda s: send_and_leave(s, JSON_HEAD + b"Content-Length: 500\r\n\r\n{\"model\":"),
    "a body that is not JSON": lambda s: send_and_read(s, with_length(b"{not json")),
    "a body of the wrong shape": lambda s: send_and_read(s, with_length(b"[1, 2, 3]")),
    "a body larger than allowed": lambda s: send_and_read(s, with_length(b" " * (5 * 1024 * 1024))),
    "a body declared far too large": lambda s: send_and_read(s, JSON_HEAD + b"Content-Length: 99999999999\r\n\r\n{"),
    "a body that stops": lambda s: send_and_read(s, JSON_HEAD + b"Content-Length: 500\r\n\r\n{"),
    "a header that stops": lambda s: send_and_read(s, b"GET /health HTTP/1.1\r\nHost: 127."),
    "bytes that are not HTTP": lambda s: send_and_read(s, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
    "a broken chunked body": lambda s: send_and_read(s, JSON_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"),
}


def request_lines(server) -> list[str]:
    return [line for line in server.log_lines() if line.startswith(REQUEST_PREFIX)]


def settled_lines(server, count: int, timeout: float = 20) -> list[str]:
    """The log's request lines once there are ``count`` (or the timeout passed), and a moment more."""
    deadline = time.monotonic() + timeout
    while len(request_lines(server)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    return request_lines(server)


@pytest.mark.parametrize("case", list(CASES))
def test_each_failed_request_is_one_log_line_and_no_traceback(server, case):
    before = len(request_lines(server))
    CASES[case](server)
    lines = settled_lines(server, before + 1)
    assert len(lines) == before + 1, (case, lines[before:])
    log = server.log.read_text(errors="replace")
    assert "Traceback" not in log and "Exception" not in log and "ClientDisconnect" not in log, log[-3000:]
    other = [line for line in server.log_lines() if line.strip() and not line.startswith(REQUEST_PREFIX)]
    assert other == [], other  # nothing but request lines (no uvicorn warnings, no restarts)


def test_after_all_that_the_server_still_answers(server):
    reply = httpx2.post(f"{server.base_url}/chat/completions", json={**LONG, "max_tokens": 3}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert " 200 " in request_lines(server)[-1]
