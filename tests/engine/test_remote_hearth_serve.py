"""Another Hearth as the remote engine (``hearth serve`` on 127.0.0.1): its answers arrive as its
own API gives them, the prefix it restored from its snapshots is reported as cached tokens, and
the window's routing client switches a session between this computer's worker and the engine."""

from __future__ import annotations

import pytest

from engine import protocol as p
from app.engine_clients.client import EngineError
from app.engine_clients.inproc_client import InprocClient
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.routing import RoutingClient
from app.engine_clients.remote.spec import RemoteEngine
from tests.helpers.serve import http, serving

pytestmark = [pytest.mark.slow, pytest.mark.process]
GREEDY = p.SamplingSpec(temperature=0.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("serve") / "home", "--api-key", "k3y") as running:
        yield running


def answer(client, request_id: str, messages: list[p.WireMessage], max_tokens: int = 12) -> tuple[str, p.Finished]:
    events = list(client.stream(p.Chat(request_id=request_id, messages=messages, max_tokens=max_tokens,
                                       sampling=GREEDY), timeout=120))
    return "".join(e.text for e in events if isinstance(e, p.TokenDelta)), events[-1]


def test_a_conversation_on_another_hearth_reports_the_tokens_it_restored(server):
    client = RemoteClient(RemoteEngine(name="den", url=server.base_url, api_key="k3y"))
    client.start()
    loaded = client.load_model("engine:den")
    listed = http("GET", f"{server.base_url}/models", headers={"Authorization": "Bearer k3y"}).json()["data"]
    assert loaded.n_ctx == listed[0]["max_model_len"] > 0  # the context comes from the server, not a guess
    history = [p.WireMessage("user", "What is the capital of France?")]
    text, first = answer(client, "t1", history)
    direct = server.client(api_key="k3y").chat.completions.create(
        model="default", messages=[{"role": "user", "content": history[0].content}], max_tokens=12, temperature=0)
    assert text == direct.choices[0].message.content
    history += [p.WireMessage("assistant", text), p.WireMessage("user", "And of Italy?")]
    _text, second = answer(client, "t2", history)
    assert second.remote.cached_tokens > 0 and second.remote.prompt_tokens > second.remote.cached_tokens
    assert first.remote.engine == "den" and second.remote.model == "default"
    client.close()


def test_the_routing_client_switches_between_this_computer_and_the_engine(server):
    local = InprocClient(telemetry_interval_ms=100)
    routing = RoutingClient(local, lambda name: RemoteEngine(name=name, url=server.base_url, api_key="k3y"))
    routing.start()
    on_here = routing.load_model("default")
    assert on_here.devices.decode.device == "cpu" and routing.active_engine == ""
    question = [p.WireMessage("user", "Say hi.")]
    here, _ = answer(routing, "h1", question, 6)
    on_engine = routing.load_model("engine:den")
    assert on_engine.devices.decode.device == "remote" and routing.active_engine == "den"
    there, finished = answer(routing, "r1", question, 6)
    assert finished.remote is not None and finished.remote.engine == "den"
    assert there == here  # the same model, greedy, on the other side
    seen = [routing.next_event(0.3) for _ in range(5)]
    assert not [e for e in seen if isinstance(e, p.Telemetry) and not e.remote]  # the idle worker's are left out
    assert not [e for e in seen if isinstance(e, (p.ModelUnloaded, p.Error))]  # the switch's own unload stays inside
    back = routing.load_model("default")
    assert back.devices.decode.device == "cpu" and routing.active_engine == ""
    again, finished = answer(routing, "h2", question, 6)
    assert again == here and finished.remote is None
    routing.close()


def test_the_worker_is_told_what_was_set_on_either_client():
    local = InprocClient(telemetry_interval_ms=0)
    local.snapshot_budget_bytes = 123 * 2**20  # set by the app before it wraps the worker's client
    routing = RoutingClient(local, lambda name: RemoteEngine(name=name, url="http://127.0.0.1:9/v1"))
    routing.cpu_variant = "safe"  # set by the window's retry on the client it holds
    assert (routing.snapshot_budget_bytes, local.cpu_variant) == (123 * 2**20, "safe")
    sent: list[p.Command] = []
    local._launch, local.send = (lambda: None), sent.append  # the handshake as sent, with no engine to answer it
    with pytest.raises(EngineError):
        routing.start(timeout=0.2)
    assert (sent[0].snapshot_budget_bytes, sent[0].cpu_variant) == (123 * 2**20, "safe")


def test_an_engine_the_registry_cannot_give_is_an_error_for_that_load_only(server):
    def refuse(name: str) -> RemoteEngine:
        raise LookupError(f"there is no engine {name}; add it in Settings → Engines")

    routing = RoutingClient(InprocClient(telemetry_interval_ms=0), refuse)
    routing.start()
    events = list(routing.stream(p.LoadModel(request_id="l1", model="engine:nope")))
    assert isinstance(events[-1], p.Error) and "there is no engine nope" in events[-1].message
    assert routing.load_model("default").devices.decode.device == "cpu"
    routing.close()
