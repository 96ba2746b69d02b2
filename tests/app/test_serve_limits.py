"""``hearth serve`` against clients that send bad values or hold connections (issue 32, points 2 and 3).

A real server on 127.0.0.1 with the embedded SmolLM2. Bad values go through the real ``httpx2``
client (the one ``openai`` uses): each is refused at the edge, 400 ``invalid_request_error`` naming
the field (``param``) and its range, and the worker that serves the model stays the same process (before,
``seed: -1`` made the server kill and restart it: 503 ``engine_restarting``; ``seed: 2**64`` was a 500).
Slow clients are raw sockets; the server's limits are shortened for the test (``LIMITS_TEST_ENV``) so
each case takes about two seconds.
"""

from __future__ import annotations

import json
import socket
import time

import httpx2
import pytest

from app.surfaces.serve.connections import LIMITS_TEST_ENV
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]

HEADER_S, BODY_IDLE_S, BODY_S, MAX_CONNECTIONS = 1.5, 1.5, 3.0, 6
CHAT = {"model": "default", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0}
COMPLETION = {"model": "default", "prompt": "Hello", "max_tokens": 2, "temperature": 0}
HUGE = "9" * 400  # a number no 64-bit field holds

# (field, the value as JSON text, words of the range its refusal gives)
BAD_VALUES = [
    ("seed", "-1", "below 2**63"), ("seed", str(2**63), "below 2**63"), ("seed", str(2**64), "below 2**63"),
    ("seed", HUGE, "below 2**63"), ("seed", "1.5", "int"),
    ("top_p", "0", "(0, 1]"), ("top_p", "1.5", "(0, 1]"), ("top_p", "-0.1", "(0, 1]"),
    ("top_p", HUGE, "(0, 1]"), ("min_p", HUGE, "[0, 1)"), ("repeat_penalty", HUGE, "between 1"),
    ("temperature", "-1", "between 0 and 2"), ("temperature", "2.5", "between 0 and 2"),
    ("temperature", "1e400", "between 0 and 2"), ("temperature", '"hot"', "float"),
    ("top_k", "-1", "between 0 and"), ("top_k", HUGE, "between 0 and"),
    ("min_p", "1", "[0, 1)"), ("min_p", "-0.5", "[0, 1)"),
    ("repeat_penalty", "0", "between 1"), ("repeat_penalty", "3", "between 1"),
    ("max_tokens", "0", "between 1 and"), ("max_tokens", str(2**64), "between 1 and"),
    ("max_tokens", HUGE, "between 1"),
    ("n", "0", "must be 1"), ("n", HUGE, "must be 1"),
    ("presence_penalty", "1e400", "between -2 and 2"), ("presence_penalty", "3", "between -2 and 2"),
    ("frequency_penalty", "2", "not supported"),
    ("stop", "[1]", "str"), ("stop", '["a", "b", "c", "d", "e"]', "at most 4"), ("stop", '[""]', "empty"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-limits-home"),
                           **{LIMITS_TEST_ENV: f"{HEADER_S},{BODY_IDLE_S},{BODY_S},{MAX_CONNECTIONS}"})
    yield running
    running.stop()


def with_value(body: dict, field: str, value: str) -> bytes:
    """``body`` as JSON with ``field`` set to ``value``, written as is (a 400-digit number stays one)."""
    text = json.dumps({**body, field: "PLACEHOLDER"})
    return text.replace('"PLACEHOLDER"', value).encode()


def post(server, path: str, content: bytes) -> httpx2.Response:
    return httpx2.post(f"{server.base_url}{path}", content=content, headers={"Content-Type": "application/json"},
                       timeout=60)


# --- point 2: bad values ---------------------------------------------------------------------------

@pytest.mark.parametrize("path, body", [("/chat/completions", CHAT), ("/completions", COMPLETION)])
def test_a_bad_value_is_refused_at_the_edge_naming_the_field_and_the_worker_goes_on(server, path, body):
    worker = server.worker().pid
    for field, value, allowed in BAD_VALUES:
        reply = post(server, path, with_value(body, field, value))
        assert reply.status_code == 400, (field, value, reply.text)
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error", (field, value, error)
        assert error["param"] == field or (error["param"] or "").startswith(f"{field}["), (field, value, error)
        assert allowed in error["message"] and len(error["message"]) < 300, (field, value, error)
    assert server.worker().pid == worker  # never stopped, never restarted
    answer = post(server, path, json.dumps(body).encode())
    assert answer.status_code == 200, answer.text
    assert server.worker().pid == worker
    assert not any("worker died" in line or "Traceback" in line for line in server.log_lines())


def test_a_message_of_the_wrong_shape_is_refused_naming_where_it_is(server):
    cases = [({"role": "user", "content": 5}, "messages[0].content"),
             ({"role": "user", "content": [{"type": "text", "text": 5}]}, "messages[0].content[0]"),
             ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, "messages[0].content"),
             ({"role": 7, "content": "hi"}, "messages[0].role"),
             ({"role": "function", "content": "hi"}, "messages[0].role"),
             ({"role": "tool", "content": "hi"}, "messages[0].tool_call_id")]
    for message, param in cases:
        reply = post(server, "/chat/completions", json.dumps({**CHAT, "messages": [message]}).encode())
        assert reply.status_code == 400, (message, reply.text)
        assert reply.json()["error"]["param"] == param, (message, reply.text)


def test_sampling_values_in_range_are_answered(server):
    body = {**CHAT, "seed": 2**63 - 1, "top_p": 0.5, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1,
            "temperature": 2}
    reply = post(server, "/chat/completions", json.dumps(body).encode())
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["finish_reason"] in ("stop", "length")


# --- point 3: slow clients and too many connections ----------------------------------------------

def connect(server) -> socket.socket:
    host, port = server.root.removeprefix("http://").rsplit(":", 1)
    connection = socket.create_connection((host, int(port)), timeout=30)
    return connection


def read_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    data = b""
    while True:
        try:
            chunk = connection.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def test_a_header_that_never_ends_is_answered_408_and_closed(server):
    connection = connect(server)
    started = time.monotonic()
    connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    reply = read_until_closed(connection)
    assert status_of(reply) == 408 and b'"header_timeout"' in reply
    assert HEADER_S - 0.2 < time.monotonic() - started < HEADER_S + 3


def test_a_connection_that_sends_nothing_is_closed_without_a_log_line(server):
    before = len(server.log_lines())
    connection = connect(server)
    started = time.monotonic()
    assert read_until_closed(connection) == b""
    assert HEADER_S - 0.2 < time.monotonic() - started < HEADER_S + 3
    assert len(server.log_lines()) == before


def test_a_header_dribbled_a_byte_at_a_time_is_cut_off(server):
    connection = connect(server)
    started, sent = time.monotonic(), 0
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: " + b"s" * 200
    try:
        for byte in request:
            connection.sendall(bytes([byte]))
            sent += 1
            time.sleep(0.1)
    except OSError:  # the server closed it: the next byte could not go
        pass
    reply = read_until_closed(connection)
    assert status_of(reply) in (0, 408) and sent < len(request)
    assert time.monotonic() - started < HEADER_S + 3


def test_a_body_that_never_comes_is_answered_408_and_closed(server):
    connection = connect(server)
    started = time.monotonic()
    connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 1000\r\n\r\n{\"model\":")
    reply = read_until_closed(connection)
    assert status_of(reply) == 408 and b'"body_timeout"' in reply
    assert BODY_IDLE_S - 0.2 < time.monotonic() - started < BODY_IDLE_S + 3


def test_a_body_dribbled_without_long_gaps_is_still_cut_off_when_its_time_is_up(server):
    connection = connect(server)
    started = time.monotonic()
    connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 1000\r\n\r\n")
    try:
        while time.monotonic() - started < BODY_S + 3:
            connection.sendall(b" ")
            time.sleep(BODY_IDLE_S / 3)
    except OSError:
        pass
    reply = read_until_closed(connection)
    assert status_of(reply) == 408
    assert BODY_S - 0.2 < time.monotonic() - started < BODY_S + 3


def test_connections_past_the_cap_are_answered_503_at_once_and_the_server_recovers(server):
    # each held connection has a request under way (its body is awaited): none can be closed to make room
    # (idle ones are: tests/app/test_serve_hostile_clients.py)
    held = [connect(server) for _ in range(MAX_CONNECTIONS)]
    for connection in held:
        connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    try:
        time.sleep(0.3)
        extra = connect(server)
        started = time.monotonic()
        reply = read_until_closed(extra)
        assert status_of(reply) == 503 and b'"too_many_connections"' in reply and b"retry-after: 2" in reply
        assert time.monotonic() - started < 1
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.3)
    assert httpx2.get(f"{server.root}/health", timeout=30).status_code == 200


def test_the_held_connections_of_a_slowloris_are_all_closed_by_the_header_deadline(server):
    held = [connect(server) for _ in range(MAX_CONNECTIONS - 1)]
    for connection in held:
        connection.sendall(b"GET /health HTTP/1.1\r\n")
    time.sleep(HEADER_S + 1)
    for connection in held:
        connection.settimeout(3)
        assert status_of(read_until_closed(connection)) == 408
        connection.close()
    assert httpx2.get(f"{server.root}/health", timeout=30).status_code == 200
