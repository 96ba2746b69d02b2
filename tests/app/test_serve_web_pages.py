"""``hearth serve`` refuses what a web page could send it (issue 32, point 1): a real server on
127.0.0.1, real ``httpx2`` requests (the client ``openai`` uses) shaped as a browser sends them, SmolLM2 behind it."""

from __future__ import annotations

import json

import httpx2
import pytest

from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
ALLOWED = "http://allowed.example"
BODY = {"model": "default", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-web-home"), "--cors", ALLOWED)
    yield running
    running.stop()


def answered(server) -> int:
    """How many requests the model has answered so far (``/health``)."""
    return httpx2.get(f"{server.root}/health", timeout=30).json()["requests"]


def post_chat(server, *, headers: dict, content: bytes = json.dumps(BODY).encode()) -> httpx2.Response:
    return httpx2.post(f"{server.base_url}/chat/completions", content=content, headers=headers, timeout=120)


def assert_error(reply: httpx2.Response, status: int, code: str) -> None:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error" and error["message"]


def test_a_cross_origin_text_plain_post_is_refused_and_the_model_does_not_run(server):
    before = answered(server)
    reply = post_chat(server, headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert_error(reply, 403, "forbidden_origin")
    assert "access-control-allow-origin" not in reply.headers
    assert answered(server) == before


def test_a_text_plain_post_without_origin_is_refused_before_the_model_runs(server):
    before = answered(server)
    assert_error(post_chat(server, headers={"Content-Type": "text/plain;charset=UTF-8"}), 415,
                 "unsupported_media_type")
    assert answered(server) == before


def test_a_rebinding_host_is_refused(server):
    port = server.root.rsplit(":", 1)[1]
    before = answered(server)
    reply = post_chat(server, headers={"Host": f"evil.example:{port}", "Content-Type": "application/json"})
    assert_error(reply, 403, "forbidden_host")
    assert_error(httpx2.get(f"{server.base_url}/models", headers={"Host": f"evil.example:{port}"}, timeout=30),
                 403, "forbidden_host")
    assert answered(server) == before


def test_loopback_hosts_with_and_without_the_port_are_answered(server):
    port = server.root.rsplit(":", 1)[1]
    for host in ("localhost", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port}", f"[::1]:{port}"):
        reply = httpx2.get(f"{server.base_url}/models", headers={"Host": host}, timeout=30)
        assert reply.status_code == 200, (host, reply.text)


def test_the_origin_given_to_cors_may_use_the_api(server):
    before = answered(server)
    reply = post_chat(server, headers={"Origin": ALLOWED, "Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text
    assert reply.headers["access-control-allow-origin"] == ALLOWED
    assert reply.json()["choices"][0]["message"]["content"]
    assert answered(server) == before + 1


def test_a_request_without_origin_is_answered(server):
    reply = post_chat(server, headers={"Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"]


def test_the_openai_client_still_works(server):
    answer = server.client().chat.completions.create(**BODY)
    assert answer.choices[0].message.content
