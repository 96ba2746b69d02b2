"""A command with a value the worker cannot use is refused, and the worker goes on (issue 32, point 2).

Two ways in, each on a real worker with the embedded SmolLM2:

- **straight down the pipe** (a raw frame the app's check never saw): the worker answers an Error
  (``bad_request``, naming the field) and the answer's Finished, then answers a good command, the
  same process;
- **through ``hearth serve``'s runner**: the app refuses the command before sending it
  (``InvalidRequest``); the runner took that for the worker's death, killed the worker and loaded the
  model again (the 503 ``engine_restarting`` any client could cause). Now the request ends as the
  worker ends a refused one, and the worker is the same process.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

from app.surfaces.serve.runner import EngineRunner, Job
from engine import protocol as p
from app.engine_clients.client import new_request_id
from engine.protocol.framing import frame
from app.engine_clients.process_client import ProcessClient
from tests.process.conftest import finished, text_of

pytestmark = pytest.mark.process

N_CTX = 512
BAD_SAMPLING = [("seed", -1), ("seed", 2**63), ("seed", 2**64 - 1), ("top_p", 0.0), ("temperature", -1.0),
                ("min_p", 1.0), ("repeat_penalty", 0.0)]
WORDS = {"top_p": "top-p", "min_p": "min-p", "repeat_penalty": "repeat penalty"}  # how the refusal names it


def complete(**sampling) -> p.Complete:
    return p.Complete(request_id=new_request_id("refuse"), prompt="The quick brown fox", max_tokens=4,
                      sampling=p.SamplingSpec(**{"temperature": 0.0, **sampling}), draft=p.DraftSpec("off"))


def raw_frame(command: p.Complete, field: str, value) -> bytes:
    """``command`` with ``sampling.field`` set to ``value`` as bytes, past the app's own check."""
    message = msgspec.to_builtins(command)
    message["sampling"][field] = value
    return frame(msgspec.msgpack.encode(message))


def events_until_finished(client: ProcessClient, rid: str, timeout: float = 120) -> list[p.Event]:
    events = []
    while (event := client.next_event(timeout)) is not None:
        if getattr(event, "request_id", None) == rid:
            events.append(event)
        if isinstance(event, p.Finished) and event.request_id == rid:
            return events
    raise AssertionError(f"no Finished for {rid}: {events}")


def assert_refused(events: list, field: str) -> None:
    kinds = [type(e) for e in events]
    assert kinds == [p.Error, p.Finished], events
    error, end = events[0], events[-1]
    assert error.code == "bad_request" and error.message.startswith(f"{WORDS.get(field, field)} must be"), error
    assert end.finish_reason == "error"


@pytest.fixture
def worker(tmp_path, smollm2):
    client = ProcessClient(env={"HEARTH_HOME": str(tmp_path / "home")})
    client.start()
    client.send(p.SetTelemetry(interval_ms=0))
    client.load_model(str(smollm2), n_ctx=N_CTX, timeout=120)
    yield client
    client.close(mode="abort", timeout=5)


def test_a_bad_value_sent_straight_to_the_worker_is_refused_and_it_answers_the_next_command(worker):
    pid = worker.process.pid
    for field, value in BAD_SAMPLING:
        command = complete()
        worker.send_raw(raw_frame(command, field, value))
        assert_refused(events_until_finished(worker, command.request_id), field)
    good = complete()
    events = list(worker.stream(good, timeout=120))
    assert finished(events).finish_reason in ("stop", "length") and text_of(events)
    assert worker.process.pid == pid and worker.process.poll() is None


def run(runner: EngineRunner, command: p.Complete) -> list:
    """``command`` as a served request: every event it had, as the runner hands them to ``finish``."""
    got, done = [], threading.Event()

    def finish(events) -> None:
        got.extend(events)
        done.set()

    runner.submit(Job(prepare=lambda: command, finish=finish))
    assert done.wait(180), "the request never ended"
    return got


def test_the_servers_runner_refuses_a_bad_value_without_restarting_its_worker(tmp_path, smollm2):
    client = ProcessClient(env={"HEARTH_HOME": str(tmp_path / "home")})
    runner = EngineRunner(client, lambda worker, model: worker.load_model(model, n_ctx=N_CTX, timeout=120),
                          str(smollm2), max_queue=4)
    restarts: list[str] = []
    runner.on_restart = restarts.append
    runner.start()
    try:
        pid = client.process.pid
        for field, value in BAD_SAMPLING:
            assert_refused(run(runner, complete(**{field: value})), field)
        events = run(runner, complete())
        assert finished(events).finish_reason in ("stop", "length") and text_of(events)
        assert restarts == [] and client.process.pid == pid and runner.up.is_set()
    finally:
        runner.stop()
