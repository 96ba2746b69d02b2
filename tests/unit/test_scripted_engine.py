"""The scripted engine client the controller tests use (tests/fakes/engine_client.py) keeps the
real clients' contract: commands checked by ``app.engine_clients.client.checked``, a request that needs a model
refused without one, each request ended by its own event, a death reported once and a restart."""

from __future__ import annotations

import pytest

from engine import protocol as p
from app.engine_clients.client import EngineDead, EngineError, InvalidRequest, checked, new_request_id
from tests.fakes.engine_client import ScriptedEngine, die, fail, hold


@pytest.fixture
def engine():
    client = ScriptedEngine()
    client.start(timeout=1)
    yield client
    client.close()


def chat(**fields) -> p.Chat:
    return p.Chat(request_id=new_request_id("chat"), messages=[p.WireMessage("user", "hi there")], **fields)


def test_an_out_of_range_value_is_refused_as_every_client_refuses_it(engine):
    command = chat(max_tokens=p.MAX_TOKENS + 1)
    with pytest.raises(InvalidRequest) as real:
        checked(command)
    with pytest.raises(InvalidRequest) as scripted:
        engine.send(command)
    assert str(scripted.value) == str(real.value) and "max_tokens" in str(real.value)
    assert engine.sent(p.ANSWERS) == [], "nothing refused reaches the engine"


def test_a_request_needing_a_model_is_refused_until_one_is_loaded_then_answered(engine):
    refused = list(engine.stream(chat(), timeout=1))
    assert [type(e) for e in refused] == [p.Error, p.Finished] and refused[0].code == "no_model"
    assert refused[1].finish_reason == "error"

    loaded = engine.load_model("default", timeout=1)
    assert loaded.n_ctx == engine.n_ctx
    events = list(engine.stream(chat(), timeout=1))
    assert [type(e) for e in events][:2] == [p.PromptProgress, p.TokenDelta] and events[-1].finish_reason == "stop"
    assert "".join(e.text for e in events if isinstance(e, p.TokenDelta)) == "Hello from the scripted engine."


def test_a_scripted_error_ends_a_generate_and_a_read_with_their_own_event(engine):
    engine.load_model("default", timeout=1)
    engine.script(p.Chat, fail("generation_failed", "the context is full"))
    engine.script(p.ReadDocument, fail("bad_request", "the document message has no id"))
    assert [type(e) for e in engine.stream(chat(), timeout=1)] == [p.Error, p.Finished]
    read = p.ReadDocument(request_id="read-1", conversation_id="c", messages=[p.WireMessage("user", "Document: x", "m")])
    events = list(engine.stream(read, timeout=1))
    assert [type(e) for e in events] == [p.Error, p.DocumentRead] and events[1].finish_reason == "error"


def test_a_held_answer_ends_cancelled_on_cancel(engine):
    engine.load_model("default", timeout=1)
    engine.script(p.Chat, hold("Once"))
    command = chat()
    engine.send(command)
    assert engine.holding == command.request_id
    engine.send(p.Cancel(request_id=command.request_id))
    events = [engine.next_event(1) for _ in range(3)]
    assert [type(e) for e in events] == [p.PromptProgress, p.TokenDelta, p.Finished]
    assert events[-1].finish_reason == "cancelled" and engine.holding is None


def test_a_death_is_reported_once_and_a_restart_brings_a_fresh_engine(engine):
    engine.load_model("default", timeout=1)
    engine.script(p.Chat, die("Half"))
    events = list(engine.stream(chat(), timeout=1))
    assert isinstance(events[-1], EngineDead) and events[-1].signal == "SIGKILL"
    with pytest.raises(EngineError) as refused:
        engine.send(p.Ping(request_id="ping"))
    assert refused.value.code == "engine_dead"

    engine.restart(timeout=1)
    assert engine.starts == 2 and engine.loaded is None
    assert [type(e) for e in engine.stream(p.Ping(request_id="ping"), timeout=1)] == [p.Pong]
