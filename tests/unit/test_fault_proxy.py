"""The fault-injecting proxy (tests/helpers/fault_proxy.py) does what the remote-engine tests rely on.

It runs in front of a small upstream written here with ``http.server``: a model list, and chat
completions answered as JSON or as a stream of ``STREAM_WORDS`` events ``EVENT_GAP_S`` apart (chunked,
as uvicorn sends them). The clients are the ``openai`` client (so error bodies are proven to read as
OpenAI's) and ``httpx2`` (to see events, timeouts and truncated bodies as they happen).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import openai
import pytest

from tests.helpers.fault_proxy import FaultProxy

STREAM_WORDS = ["w0 ", "w1 ", "w2 ", "w3 ", "w4 "]
EVENT_GAP_S = 0.15
CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}


class StubUpstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []  # paths of the requests that reached the upstream

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self._json({"object": "list", "data": [{"id": "stub", "object": "model", "created": 0, "owned_by": "me"}]})

    def do_POST(self) -> None:
        self.seen.append(self.path)
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not request.get("stream"):
            message = {"role": "assistant", "content": "".join(STREAM_WORDS)}
            self._json({"id": "c1", "object": "chat.completion", "created": 0, "model": "stub",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for word in STREAM_WORDS:
            self._chunk(b"data: " + json.dumps(chunk_of(word)).encode() + b"\n\n")
            time.sleep(EVENT_GAP_S)
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _json(self, value: dict) -> None:
        payload = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def chunk_of(word: str) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "stub",
            "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}


@pytest.fixture(scope="module")
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubUpstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream):
    StubUpstream.seen.clear()
    with FaultProxy(upstream) as running:
        yield running


def client(proxy: FaultProxy, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10, **options)


def stream_events(proxy: FaultProxy, timeout: float = 10) -> tuple[list[tuple[float, str]], Exception | None]:
    """(arrival time, data) of each data line of a streamed chat, and the error that ended it, if any."""
    events: list[tuple[float, str]] = []
    try:
        with httpx2.stream("POST", f"{proxy.base_url}/chat/completions", json={**CHAT, "stream": True},
                           timeout=timeout) as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    events.append((time.monotonic(), line[5:].strip()))
    except httpx2.HTTPError as exc:
        return events, exc
    return events, None


def test_answers_pass_through_unchanged(proxy):
    assert [m.id for m in client(proxy).models.list()] == ["stub"]
    answer = client(proxy).chat.completions.create(**CHAT)
    assert answer.choices[0].message.content == "".join(STREAM_WORDS)
    streamed = client(proxy).chat.completions.create(**CHAT, stream=True)
    assert "".join(c.choices[0].delta.content for c in streamed) == "".join(STREAM_WORDS)
    assert [(r.method, r.path, r.fault) for r in proxy.requests] == [
        ("GET", "/v1/models", ""), ("POST", "/v1/chat/completions", ""), ("POST", "/v1/chat/completions", "")]


def test_a_stream_is_forwarded_event_by_event(proxy):
    events, error = stream_events(proxy)
    assert error is None
    assert [e[1] for e in events][-1] == "[DONE]" and len(events) == len(STREAM_WORDS) + 1
    # the first event arrived while the upstream was still writing the rest
    assert events[-1][0] - events[0][0] >= (len(STREAM_WORDS) - 1) * EVENT_GAP_S * 0.8


def test_drop_after_closes_the_connection_mid_stream(proxy):
    proxy.drop_after(2, times=1)
    events, error = stream_events(proxy)
    assert [json.loads(e[1])["choices"][0]["delta"]["content"] for e in events] == STREAM_WORDS[:2]
    assert isinstance(error, httpx2.RemoteProtocolError)  # a truncated body, not a clean end
    events, error = stream_events(proxy)  # used up: the next stream is whole
    assert error is None and len(events) == len(STREAM_WORDS) + 1


@pytest.mark.parametrize("code, error_class", [
    (401, openai.AuthenticationError), (403, openai.PermissionDeniedError), (404, openai.NotFoundError),
    (429, openai.RateLimitError), (503, openai.InternalServerError)])
def test_status_answers_with_an_openai_error(proxy, code, error_class):
    proxy.status(code, retry_after=2 if code in (429, 503) else None, times=1)
    with pytest.raises(error_class) as caught:
        client(proxy).chat.completions.create(**CHAT)
    assert caught.value.status_code == code
    assert caught.value.message and caught.value.type  # read from the body's "error" object
    assert caught.value.response.headers.get("retry-after") == ("2" if code in (429, 503) else None)
    assert StubUpstream.seen == []  # answered by the proxy alone
    assert client(proxy).chat.completions.create(**CHAT).choices[0].message.content  # used up


def test_status_for_some_requests_on_one_path(proxy):
    proxy.status(503, body={"error": {"message": "busy", "type": "server_error"}}, times=2,
                 path="/chat/completions")
    assert [m.id for m in client(proxy).models.list()] == ["stub"]  # another path: untouched
    for _ in range(2):
        with pytest.raises(openai.InternalServerError, match="busy"):
            client(proxy).chat.completions.create(**CHAT)
    assert client(proxy).chat.completions.create(**CHAT).choices
    assert [r.fault for r in proxy.requests] == ["", "status", "status", ""]


def test_a_fault_for_every_request_lasts_until_cleared(proxy):
    proxy.status(429)
    for _ in range(3):
        with pytest.raises(openai.RateLimitError):
            client(proxy).models.list()
    proxy.clear()
    assert client(proxy).models.list().data


def test_garbage_sse_is_a_stream_of_malformed_events(proxy):
    proxy.garbage_sse()
    with httpx2.stream("POST", f"{proxy.base_url}/chat/completions", json={**CHAT, "stream": True}) as reply:
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        data = [line[5:].strip() for line in reply.iter_lines() if line.startswith("data:")]
    unreadable = 0
    for item in data[:-1]:
        try:
            choices = json.loads(item)["choices"]
            unreadable += not isinstance(choices, list)
        except (ValueError, KeyError):
            unreadable += 1
    assert unreadable == len(data) - 1 >= 2


def test_hang_never_answers_and_stop_lets_it_go(upstream):
    proxy = FaultProxy(upstream).__enter__()
    proxy.hang()
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        httpx2.get(f"{proxy.base_url}/models", timeout=0.5)
    assert time.monotonic() - started < 5
    ended: list[BaseException] = []

    def waiting() -> None:
        try:
            httpx2.get(f"{proxy.base_url}/models", timeout=30)
        except httpx2.HTTPError as exc:
            ended.append(exc)

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(0.3)
    proxy.stop()
    thread.join(5)
    assert not thread.is_alive() and isinstance(ended[0], httpx2.RemoteProtocolError)
    assert [r.fault for r in proxy.requests] == ["hang", "hang"]


def test_delay_before_the_answer_and_between_events(proxy):
    proxy.delay(0.6, times=1)
    started = time.monotonic()
    client(proxy).models.list()
    assert time.monotonic() - started >= 0.6
    started = time.monotonic()
    client(proxy).models.list()
    assert time.monotonic() - started < 0.5
    proxy.delay(between_events=0.3, times=1)
    events, error = stream_events(proxy)
    assert error is None
    gaps = [b[0] - a[0] for a, b in zip(events, events[1:])]
    assert min(gaps) >= 0.3 - 0.02


def test_an_unreachable_upstream_is_a_bad_gateway():
    with FaultProxy("http://127.0.0.1:9/v1") as proxy:
        with pytest.raises(openai.APIStatusError) as caught:
            client(proxy).models.list()
    assert caught.value.status_code == 502
