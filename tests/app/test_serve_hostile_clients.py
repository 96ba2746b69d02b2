"""``hearth serve`` against clients that are not alone or not careful (issue 50, point 4).

A real server on 127.0.0.1 with its real limits (64 connections, a 10 s header deadline), driven
through the real ``openai`` client, ``httpx2`` and raw sockets. The model is ``llama-real-tiny``
(Llama 3.2's template and vocabulary, random weights): its template trims an answer it writes back,
so the worker keeps the state where a question ended, which is what a repeated question met.

- identical requests sent together are each answered as if alone (before: [200, 400, 400], "the
  prompt is empty": the second matched the first one's stored question, whose saved state already
  held the whole prompt);
- a body nested 200,000 deep, in any field, is a 400 naming the field (before: 500, a
  ``RecursionError`` in the decoder), and the server answers the next request;
- 64 and more idle sockets do not keep the API from a client that sends a whole request (before:
  503 to everyone until the header deadline closed them).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx2
import pytest

from tests.helpers.real_models import REAL_TINY, real_model
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
MODEL = REAL_TINY["llama"]  # the id a server of the file answers for: its name
DEEP = 200_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-hostile-home"), "--model", str(real_model(MODEL)))
    yield running
    running.stop()


# --- identical requests at the same time -------------------------------------------------------------

ALONE_CASES = {
    "one question": [{"role": "user", "content": "hi"}],
    "a system prompt and a question": [{"role": "system", "content": "You are terse."},
                                       {"role": "user", "content": "Name a colour."}],
}


@pytest.mark.parametrize("messages", ALONE_CASES.values(), ids=ALONE_CASES.keys())
def test_identical_requests_sent_together_are_each_answered_as_if_alone(server, messages):
    # the worker kept the state where the question ended (the template trims the answer it writes
    # back); a request matched to the stored question stood on it with nothing left to read
    def ask():
        return server.client().chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=8, temperature=0)

    alone = ask()
    assert alone.status_code == 200
    expected = alone.parse()
    replies: list = [None] * 3
    start = threading.Barrier(3)

    def one(index: int) -> None:
        start.wait()
        try:
            replies[index] = ask()
        except Exception as exc:  # noqa: BLE001 - an error status is the failure shown below
            replies[index] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    statuses = [getattr(reply, "status_code", reply) for reply in replies]
    assert statuses == [200, 200, 200], statuses
    for reply in replies:
        answer = reply.parse()
        assert answer.choices[0].message.content == expected.choices[0].message.content
        assert answer.usage.prompt_tokens == expected.usage.prompt_tokens  # read the same prompt, whole
        assert answer.usage.completion_tokens == expected.usage.completion_tokens
    # a conversation continued from one of them still reads only what is new
    follow = [*messages, {"role": "assistant", "content": expected.choices[0].message.content},
              {"role": "user", "content": "And another?"}]
    continued = server.client().chat.completions.create(model=MODEL, messages=follow, max_tokens=4, temperature=0)
    assert continued.usage.prompt_tokens_details.cached_tokens > 0


# --- JSON nested too deep ----------------------------------------------------------------------------

def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0}
DEEP_BODIES = {
    "the body": (nested(DEEP), None),
    "objects in objects": ('{"a":' * DEEP + "1" + "}" * DEEP, "a.a.a.a.a"),
    "messages": (json.dumps({**CHAT, "messages": "X"}).replace('"X"', nested(DEEP)), "messages"),
    "a text part": (json.dumps({**CHAT, "messages": [{"role": "user", "content": [{"type": "text", "text": "X"}]}]})
                    .replace('"X"', nested(DEEP)), "messages[0].content[0].text"),
    "enable_thinking": (json.dumps({**CHAT, "chat_template_kwargs": {"enable_thinking": "X"}})
                        .replace('"X"', nested(DEEP)), "chat_template_kwargs.enable_thinking"),
    "metadata": (json.dumps({**CHAT, "metadata": "X"}).replace('"X"', '{"k":' * DEEP + '"v"' + "}" * DEEP),
                 "metadata.k.k.k.k"),
}


@pytest.mark.parametrize("body, param", DEEP_BODIES.values(), ids=DEEP_BODIES.keys())
def test_json_nested_too_deep_is_a_400_naming_the_field_and_the_server_goes_on(server, body, param):
    reply = httpx2.post(f"{server.base_url}/chat/completions", content=body.encode(),
                        headers={"Content-Type": "application/json"}, timeout=60)
    assert reply.status_code == 400, reply.text[:500]
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "nested_too_deep", error
    assert error["param"] == param, error
    assert "levels deep" in error["message"] and len(error["message"]) < 300, error
    after = httpx2.post(f"{server.base_url}/chat/completions", json=CHAT, timeout=120)
    assert after.status_code == 200, after.text
    assert not any("Traceback" in line or "RecursionError" in line for line in server.log_lines())


def test_strings_full_of_brackets_and_ordinary_nesting_are_not_refused(server):
    text = "[{" * 300 + ' \\" ' + "]}" * 300  # in a string, brackets nest nothing
    parts = [{"type": "text", "text": text}, {"type": "text", "text": " Say hi."}]
    body = {**CHAT, "messages": [{"role": "user", "content": parts}], "metadata": {"a": "[[[["}}
    reply = httpx2.post(f"{server.base_url}/chat/completions", json=body, timeout=300)
    assert reply.status_code == 200, reply.text[:500]


# --- idle sockets past the connection cap ------------------------------------------------------------

def connect(server) -> socket.socket:
    host, port = server.root.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def test_idle_sockets_past_the_cap_do_not_keep_a_whole_request_out(server):
    """64 is the server's cap; a client holding 70 sockets that say nothing (renewed before the 10 s
    header deadline) used to get every other client 503 until the deadline."""
    idle = [connect(server) for _ in range(70)]
    try:
        time.sleep(0.5)
        with httpx2.Client(timeout=30) as client:
            for _ in range(3):
                started = time.monotonic()
                reply = client.get(f"{server.base_url}/models", headers={"Connection": "close"})
                assert reply.status_code == 200, reply.text
                assert time.monotonic() - started < 5  # at once, not at the header deadline (10 s)
                idle.append(connect(server))  # the idle client renews what it lost
            answer = client.post(f"{server.base_url}/chat/completions", json=CHAT)
            assert answer.status_code == 200, answer.text
    finally:
        for connection in idle:
            connection.close()


def test_sockets_closed_to_make_room_are_the_oldest_idle_ones(server):
    time.sleep(6)  # the kept-alive connections of earlier tests' clients end (uvicorn's 5 s)
    oldest = connect(server)
    time.sleep(0.2)
    idle = [connect(server) for _ in range(63)]
    try:
        time.sleep(0.5)
        reply = httpx2.get(f"{server.base_url}/models", timeout=30)
        assert reply.status_code == 200, reply.text
        oldest.settimeout(5)
        assert oldest.recv(1024) == b""  # closed without a word: it made no request
        for connection in idle:  # the others are still open
            connection.setblocking(False)
            with pytest.raises(BlockingIOError):
                connection.recv(1024)
    finally:
        oldest.close()
        for connection in idle:
            connection.close()
