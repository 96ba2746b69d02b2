"""A remote engine that is llama-cpp-python's own OpenAI server with SmolLM2 on 127.0.0.1: what
Hearth's remote client gets is what the server gives the official ``openai`` client, token for
token; the model list, stops, usage, documents and cancelling work against the real server."""

from __future__ import annotations

import time

import openai
import pytest

from app.services.turn import regenerate_turn, send_turn
from engine import protocol as p
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.probe import probe
from app.engine_clients.remote.spec import RemoteEngine
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database

pytestmark = [pytest.mark.slow, pytest.mark.process]
QUESTION = [p.WireMessage("user", "Name three colours of the rainbow.")]


@pytest.fixture(scope="module")
def remote(llama_cpp_server):
    client = RemoteClient(RemoteEngine(name="llama", url=llama_cpp_server.base_url))
    client.start()
    loaded = client.load_model("engine:llama")
    yield client, loaded
    client.close()


def answer(client: RemoteClient, command: p.Answer) -> tuple[str, p.Finished, list[p.Event]]:
    events = list(client.stream(command, timeout=120))
    text = "".join(e.text for e in events if isinstance(e, p.TokenDelta))
    return text, events[-1], events


def direct(server, **request) -> str:
    """The same request through the official client, straight to the server, streamed."""
    client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120)
    pieces = []
    if "messages" in request:
        for chunk in client.chat.completions.create(model=server.model, stream=True, **request):
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    else:
        for chunk in client.completions.create(model=server.model, stream=True, **request):
            if chunk.choices:
                pieces.append(chunk.choices[0].text)
    return "".join(pieces)


def test_the_engine_lists_its_model_and_is_described_as_remote(remote, llama_cpp_server):
    _client, loaded = remote
    assert loaded.facts.name == llama_cpp_server.model and loaded.facts.path == "engine:llama"
    assert loaded.devices.prefill.device == loaded.devices.decode.device == "remote"
    assert "remote engine llama" in loaded.devices.decode.reason
    checked = probe(RemoteEngine(name="llama", url=llama_cpp_server.base_url))
    assert checked.ok and checked.models == [llama_cpp_server.model] and checked.error is None
    assert checked.latency_ms > 0 and checked.tok_s > 0 and "not encrypted" in checked.warning


def test_a_greedy_chat_answer_equals_the_servers_answer_to_the_openai_client(remote, llama_cpp_server):
    client, _ = remote
    text, finished, events = answer(client, p.Chat(request_id="greedy", messages=QUESTION, max_tokens=48,
                                                   sampling=p.SamplingSpec(temperature=0.0)))
    expected = direct(llama_cpp_server, messages=[{"role": "user", "content": QUESTION[0].content}], max_tokens=48,
                      temperature=0)
    assert text == expected and len(text) > 20
    assert sum(isinstance(e, p.TokenDelta) for e in events) > 5  # it streamed
    assert finished.finish_reason in ("stop", "length") and finished.remote.engine == "llama"
    assert finished.remote.model == llama_cpp_server.model
    assert finished.remote.prompt_tokens is None  # this server reports no usage in a stream: unknown, not 0
    assert finished.timings.ttft_ms > 0 and finished.timings.gen_n > 5


def test_a_raw_completion_and_a_stop_string_match_the_server_too(remote, llama_cpp_server):
    client, _ = remote
    text, _, _ = answer(client, p.Complete(request_id="raw", prompt="The sky is", max_tokens=24,
                                           sampling=p.SamplingSpec(temperature=0.0)))
    assert text == direct(llama_cpp_server, prompt="The sky is", max_tokens=24, temperature=0)
    whole, _, _ = answer(client, p.Chat(request_id="nostop", messages=QUESTION, max_tokens=48,
                                        sampling=p.SamplingSpec(temperature=0.0)))
    stop = whole.split()[2]  # a word from the middle of the greedy answer
    cut, finished, _ = answer(client, p.Chat(request_id="stop", messages=QUESTION, max_tokens=48, stop=[stop],
                                             sampling=p.SamplingSpec(temperature=0.0)))
    assert cut == whole[:whole.index(stop)] and finished.finish_reason == "stop"


def test_a_stop_closes_the_stream_at_once_and_the_engine_answers_the_next_request(remote):
    client, _ = remote
    command = p.Chat(request_id="long", messages=[p.WireMessage("user", "Write a long story about a dragon.")],
                     max_tokens=1500, sampling=p.SamplingSpec(temperature=0.0))
    client.send(command)
    deltas = 0
    while (event := client.next_event(60)) is not None:
        if isinstance(event, p.TokenDelta):
            deltas += 1
            if deltas == 3:
                client.send(p.Cancel(request_id="long"))
                stopped_at = time.monotonic()
        if isinstance(event, p.Finished):
            break
    assert event.finish_reason == "cancelled" and time.monotonic() - stopped_at < 5
    text, finished, _ = answer(client, p.Chat(request_id="after", messages=QUESTION, max_tokens=4,
                                              sampling=p.SamplingSpec(temperature=0.0)))
    assert text and finished.finish_reason == "length"


def test_a_document_is_counted_by_the_server_and_one_too_long_is_refused_with_the_numbers(remote):
    client, loaded = remote
    short = next(e for e in client.stream(p.MeasureText(request_id="m1", text="A short note about tea."))
                 if isinstance(e, p.TextMeasured))
    assert short.fits and 3 <= short.tokens <= 12  # counted by the server's tokenizer, not estimated
    long_text = "The keeper climbed the stairs again. " * 600
    long = next(e for e in client.stream(p.MeasureText(request_id="m2", text=long_text))
                if isinstance(e, p.TextMeasured))
    assert not long.fits and long.tokens > loaded.n_ctx and long.budget_tokens < loaded.n_ctx
    first = next(e for e in client.stream(p.MeasureText(request_id="m3", text=long_text, keep="first"))
                 if isinstance(e, p.TextMeasured))
    assert 0 < first.kept_tokens <= first.budget_tokens and long_text.startswith(first.kept_text)


def test_a_document_read_on_the_engine_is_measured_after_the_messages_before_it(remote):
    client, loaded = remote
    earlier = [p.WireMessage(role="user", content="Hello there, what a day. " * 40),
               p.WireMessage(role="assistant", content="Indeed.")]

    def read(request_id: str, text: str) -> p.DocumentRead:
        command = p.ReadDocument(request_id=request_id, conversation_id="c",
                                 messages=[*earlier, p.WireMessage(role="user", content=text, id="d")])
        return next(e for e in client.stream(command) if isinstance(e, p.DocumentRead))

    short = read("r1", "A short note about tea.")
    assert short.finish_reason == "stop" and 3 <= short.tokens <= 12 and short.room is None
    long = read("r2", "The keeper climbed the stairs again. " * 600)
    room = long.room
    assert long.finish_reason == "too_long" and room.tokens > loaded.n_ctx
    assert room.held_tokens > 200, "the messages before it, counted by the server, and the template"
    assert room.budget_tokens == room.grown_budget_tokens == loaded.n_ctx - 1024 - room.held_tokens


def test_a_conversation_turn_on_the_engine_is_stored_with_the_engine_and_model(remote, tmp_path, llama_cpp_server):
    client, _ = remote
    db = open_database(database_path(tmp_path))
    store = ConversationStore(db)
    conversation = store.create("remote")
    turn = send_turn(store, client, conversation.id, "Say hello.", max_tokens=8,
                     sampling=p.SamplingSpec(temperature=0.0))
    stored = store.message(turn.answer.id)
    assert stored.status == "done" and stored.content == turn.text and stored.content
    assert stored.stats["engine"] == "llama" and stored.stats["model"] == llama_cpp_server.model
    assert "snapshot" not in stored.stats and "draft" not in stored.stats  # nothing local is claimed


def test_regenerating_and_editing_on_the_engine_keep_the_earlier_answers_as_branches(remote, tmp_path):
    client, _ = remote
    store = ConversationStore(open_database(database_path(tmp_path)))
    conversation = store.create("branches")
    first = send_turn(store, client, conversation.id, "Name a fruit.", max_tokens=8,
                      sampling=p.SamplingSpec(temperature=0.0))
    again = regenerate_turn(store, client, conversation.id, first.user.id, max_tokens=8,
                            sampling=p.SamplingSpec(temperature=0.0))
    assert again.text == first.text and again.answer.id != first.answer.id  # greedy: the same answer again
    assert {m.id for m in store.siblings(again.answer.id)} == {first.answer.id, again.answer.id}
    asked = send_turn(store, client, conversation.id, "Name a vegetable.", max_tokens=8,
                      sampling=p.SamplingSpec(temperature=0.0))
    edited = send_turn(store, client, conversation.id, "Name a tree.", reply_to=again.answer.id, max_tokens=8,
                       sampling=p.SamplingSpec(temperature=0.0))  # the second question, edited
    assert {m.id for m in store.siblings(edited.user.id)} == {asked.user.id, edited.user.id}
    branch = store.current_branch(conversation.id)
    assert [m.content for m in branch] == ["Name a fruit.", again.text, "Name a tree.", edited.text] and edited.text
