"""A remote engine that fails: a fault-injecting proxy on 127.0.0.1 in front of the real
llama_cpp.server drops streams, delays, hangs, answers 401/404/429/503 and sends garbage. Each
failure is one error a user can act on, a partial answer is kept (and stored, marked), and retries
are bounded."""

from __future__ import annotations

import socket

import pytest

from app.services.turn import send_turn
from engine import protocol as p
from app.engine_clients.client import EngineError
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.retry import RetryPolicy
from app.engine_clients.remote.spec import RemoteEngine
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.helpers.fault_proxy import FaultProxy

pytestmark = [pytest.mark.slow, pytest.mark.process]
STORY = [p.WireMessage("user", "Write a long story about a lighthouse keeper.")]
FAST_RETRIES = RetryPolicy(attempts=3, first_wait_s=0.05, max_wait_s=0.2)


@pytest.fixture
def proxy(llama_cpp_server):
    with FaultProxy(llama_cpp_server.base_url) as running:
        yield running


def connected(url: str, policy: RetryPolicy = FAST_RETRIES) -> RemoteClient:
    client = RemoteClient(RemoteEngine(name="flaky", url=url), policy=policy)
    client.start()
    client.load_model("engine:flaky")
    return client


def load_error(name: str, url: str) -> EngineError:
    """The error loading the engine at ``url`` fails with (the test fails if it loads)."""
    client = RemoteClient(RemoteEngine(name=name, url=url))
    client.start()
    try:
        with pytest.raises(EngineError) as failed:
            client.load_model(f"engine:{name}")
    finally:
        client.close()
    return failed.value


def run(client: RemoteClient, max_tokens: int = 200) -> tuple[str, list[str], p.Finished]:
    events = list(client.stream(p.Chat(request_id=f"r{id(client)}{max_tokens}", messages=STORY,
                                       max_tokens=max_tokens, sampling=p.SamplingSpec(temperature=0.0)),
                                timeout=120))
    text = "".join(e.text for e in events if isinstance(e, p.TokenDelta))
    return text, [e.code for e in events if isinstance(e, p.Error)], events[-1]


def test_a_stream_dropped_midway_keeps_what_was_written_and_says_so(proxy):
    client = connected(proxy.base_url)
    proxy.drop_after(6, times=1)
    text, codes, finished = run(client)
    assert text and codes == ["remote_disconnected"] and finished.finish_reason == "error"
    assert len(proxy.requests) == 2  # the model list, then the one answer: nothing is sent again after text came
    client.close()


def test_a_dropped_answer_is_stored_with_its_partial_text_and_marked(proxy, tmp_path):
    client = connected(proxy.base_url)
    store = ConversationStore(open_database(database_path(tmp_path)))
    conversation = store.create("flaky")
    proxy.drop_after(5, times=1)
    turn = send_turn(store, client, conversation.id, "Tell me a story.", max_tokens=200,
                     sampling=p.SamplingSpec(temperature=0.0))
    stored = store.message(turn.answer.id)
    assert stored.status == "error" and stored.content and stored.content == turn.text
    assert "broke while it was answering" in stored.stats["errors"][0]
    assert store.current_branch(conversation.id)[0].content == "Tell me a story."  # the question is kept
    client.close()


def test_busy_answers_are_retried_with_backoff_a_bounded_number_of_times(proxy):
    client = connected(proxy.base_url)
    proxy.status(429, retry_after=0, times=2, path="chat")
    events = list(client.stream(p.Chat(request_id="busy", messages=STORY, max_tokens=8,
                                       sampling=p.SamplingSpec(temperature=0.0)), timeout=120))
    waits = [e for e in events if isinstance(e, p.RemoteWaiting)]
    assert [w.attempt for w in waits] == [2, 3] and "is busy (HTTP 429)" in waits[0].message
    assert waits[0].message.endswith("trying again in 0.05 s (try 2 of 3)")
    assert events[-1].finish_reason == "length" and not [e for e in events if isinstance(e, p.Error)]
    assert [r.fault for r in proxy.requests if "chat" in r.path] == ["status", "status", ""]
    proxy.status(503, path="chat")  # never available
    text, codes, finished = run(client, max_tokens=8)
    assert codes == ["remote_busy"] and finished.finish_reason == "error" and not text
    assert sum("chat" in r.path for r in proxy.requests) == 3 + FAST_RETRIES.attempts
    client.close()


@pytest.mark.parametrize("code, expected", [(401, "remote_auth"), (403, "remote_auth"), (404, "remote_model"),
                                            (500, "remote_bad_reply")])
def test_refusals_are_not_retried_and_each_has_its_own_error(proxy, code, expected):
    client = connected(proxy.base_url)
    proxy.status(code, path="chat")
    _text, codes, finished = run(client, max_tokens=8)
    assert codes == [expected] and finished.finish_reason == "error"
    assert sum("chat" in r.path for r in proxy.requests) == 1
    client.close()


def test_a_wrong_key_at_load_time_is_an_error_naming_the_key(proxy):
    proxy.status(401, path="models")
    refused = load_error("flaky", proxy.base_url)
    assert refused.code == "remote_auth" and "refused the API key" in str(refused)


def test_garbage_in_the_stream_is_a_broken_answer_not_a_crash(proxy):
    client = connected(proxy.base_url)
    proxy.garbage_sse(times=1)
    _text, codes, finished = run(client, max_tokens=8)
    assert codes == ["remote_bad_reply"] and finished.finish_reason == "error"
    text, codes, _ = run(client, max_tokens=8)  # the client goes on
    assert text and not codes
    client.close()


def test_an_engine_that_stops_answering_times_out(proxy, monkeypatch):
    # The test switch for the 600 s read limit: short enough to reach, long enough that the real server's
    # own first token, after the proxy's delay below, comes within it while other tests load the machine.
    monkeypatch.setenv("HEARTH_TEST_REMOTE_TIMEOUT_S", "4")
    client = connected(proxy.base_url)
    proxy.hang(times=1, path="chat")
    _text, codes, finished = run(client, max_tokens=8)
    assert codes == ["remote_timeout"] and finished.finish_reason == "error"
    proxy.delay(0.3, times=1, path="chat")  # slow but within the limit: answered
    text, codes, _ = run(client, max_tokens=8)
    assert text and not codes
    client.close()


def test_a_stop_during_a_busy_wait_ends_the_request_at_once(proxy):
    client = connected(proxy.base_url, RetryPolicy(attempts=5, first_wait_s=30, max_wait_s=30))
    proxy.status(503, path="chat")
    command = p.Chat(request_id="waiting", messages=STORY, max_tokens=8)
    client.send(command)
    while not any("chat" in r.path for r in proxy.requests):
        client.next_event(0.05)
    client.send(p.Cancel(request_id="waiting"))  # during the first 30 s wait
    event = client.next_event(10)
    while event is not None and not isinstance(event, p.Finished):
        event = client.next_event(10)
    assert event is not None and event.finish_reason == "cancelled"  # within seconds, not after the wait
    assert sum("chat" in r.path for r in proxy.requests) == 1
    client.close()


def test_an_unreachable_engine_and_a_failed_tls_handshake_are_said_in_words(llama_cpp_server):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = load_error("gone", f"http://127.0.0.1:{port}/v1")
    assert unreachable.code == "remote_unreachable" and "cannot reach the engine gone" in str(unreachable)
    plain = llama_cpp_server.base_url.replace("http://", "https://")  # TLS to a server that speaks plain HTTP
    tls = load_error("tls", plain)
    assert tls.code == "remote_tls" and "did not prove who it is" in str(tls)


def test_an_endless_answer_to_the_model_list_is_refused_not_read_into_memory(proxy):
    proxy.status(200, body=b"[" + b"0," * (9 * 2**20), path="models")  # 18 MiB of "JSON"
    refused = load_error("flood", proxy.base_url)
    assert refused.code == "remote_bad_reply" and "more than 16 MiB" in str(refused)
