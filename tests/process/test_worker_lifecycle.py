"""The real worker process: handshake, streaming, reuse, errors, cancel, death and restart."""

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from engine import protocol as p
from app.engine_clients.client import EngineDead, EngineError, new_request_id
from app.engine_clients.inproc_client import InprocClient
from app.engine_clients.process_client import ProcessClient
from tests.process.conftest import collect, finished, generate, text_of, wait_for

pytestmark = pytest.mark.process


def test_handshake_reports_versions_and_devices(hearth_home):
    client = ProcessClient()
    ready = client.start()
    try:
        assert ready.protocol_version == p.PROTOCOL_VERSION
        assert ready.versions["llama-cpp-python"] == "0.3.36"
        assert {"onnxruntime", "hearth", "python"} <= set(ready.versions)
        assert ready.devices and ready.devices[0].kind == "cpu"
        assert ready.pid == client.pid
    finally:
        client.close()


def test_protocol_version_mismatch_is_a_clear_error_and_the_worker_exits():
    client = ProcessClient()
    with pytest.raises(EngineError) as caught:
        client.start(protocol_version=p.PROTOCOL_VERSION + 1)
    assert caught.value.code == "protocol_mismatch"
    assert "reinstall" in str(caught.value)
    assert client.process.wait(10) == 0
    client.close()


def test_streams_deltas_that_match_the_in_process_engine(worker, hybrid_tiny):
    worker.load_model(str(hybrid_tiny))
    events = collect(worker, generate(max_tokens=40))
    deltas = [e for e in events if isinstance(e, p.TokenDelta)]
    assert len(deltas) >= 2
    assert sum(d.n_tokens for d in deltas) == finished(events).timings.gen_n == 40
    inproc = InprocClient(telemetry_interval_ms=0)
    inproc.start()
    try:
        inproc.load_model(str(hybrid_tiny))
        reference = collect(inproc, generate(max_tokens=40))
    finally:
        inproc.close()
    assert finished(events).token_ids == finished(reference).token_ids
    assert text_of(events) == text_of(reference)


def test_two_requests_reuse_the_loaded_model(worker, hybrid_tiny):
    worker.load_model(str(hybrid_tiny))
    first = collect(worker, generate(max_tokens=8))
    second = collect(worker, generate("Another prompt", max_tokens=8))
    assert finished(first).finish_reason == finished(second).finish_reason == "length"
    assert not any(isinstance(e, (p.ModelLoading, p.ModelLoaded)) for e in first + second)


def test_request_errors_end_only_that_request(worker, hybrid_tiny, tmp_path):
    events = collect(worker, generate())
    errors = [e for e in events if isinstance(e, p.Error)]
    assert errors[0].code == "no_model"
    assert finished(events).finish_reason == "error"
    with pytest.raises(EngineError, match="no such file"):
        worker.load_model(str(tmp_path / "missing.gguf"))
    worker.load_model(str(hybrid_tiny))
    bad_template = collect(worker, p.Chat(request_id=new_request_id("t"), messages=[p.WireMessage("robot", "hi")]))
    assert any(isinstance(e, p.Error) and "role" in e.message for e in bad_template)
    assert finished(collect(worker, generate())).finish_reason == "length"


def test_cancel_mid_generation_then_the_next_request_works(worker, hybrid_tiny):
    worker.load_model(str(hybrid_tiny))  # it never writes an end-of-text token, so only cancel stops it early
    command = generate("Write a long story about a dragon.", max_tokens=6000)
    seen = 0
    for event in worker.stream(command, timeout=120):
        if isinstance(event, p.TokenDelta):
            seen += event.n_tokens
            if seen >= 5:
                worker.send(p.Cancel(request_id=command.request_id))
        if isinstance(event, p.Finished):
            end = event
    assert end.finish_reason == "cancelled"
    assert seen <= end.timings.gen_n < 6000
    assert finished(collect(worker, generate(max_tokens=4))).finish_reason == "length"


def test_cancel_mid_prefill_stops_reading(worker):
    worker.load_model("default")
    command = generate("The river flows past the old mill. " * 300, max_tokens=10)
    events = []
    for event in worker.stream(command, timeout=120):
        events.append(event)
        if isinstance(event, p.PromptProgress) and len(events) == 1:
            worker.send(p.Cancel(request_id=command.request_id))
    progress = [e for e in events if isinstance(e, p.PromptProgress)]
    assert progress[0].total > 2 * progress[0].processed  # there was much left to read
    exact = [e for e in progress if not e.estimated]  # heartbeats estimate while a chunk is read
    assert len(exact) <= 2  # the chunk in flight may finish, no more
    assert max(e.processed for e in progress) < progress[0].total
    assert finished(events).finish_reason == "cancelled"
    assert not any(isinstance(e, p.TokenDelta) for e in events)


def test_kill_9_is_reported_once_and_restart_recovers(worker, hybrid_tiny):
    worker.load_model(str(hybrid_tiny))
    command = generate("Tell me everything about the sea.", max_tokens=6000)
    worker.send(command)
    wait_for(worker, p.TokenDelta)
    os.kill(worker.pid, signal.SIGKILL)
    dead = wait_for(worker, EngineDead)
    assert dead.exit_code == -signal.SIGKILL and "killed" in dead.message
    while (event := worker.next_event(1.0)) is not None:
        assert not isinstance(event, EngineDead), "death must be reported once"
    worker.restart()
    worker.load_model(str(hybrid_tiny))
    assert finished(collect(worker, generate(max_tokens=4))).finish_reason == "length"


PARENT = textwrap.dedent("""
    import sys, time
    from app.engine_clients.process_client import ProcessClient
    client = ProcessClient()
    client.start()
    print(client.pid, flush=True)
    time.sleep(600)
""")


def assert_gone_within_2s(worker: psutil.Process) -> None:
    try:
        worker.wait(2.0)
    except psutil.TimeoutExpired:
        worker.kill()
        pytest.fail("the worker outlived its parent by more than 2 s")


def test_worker_dies_with_its_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    worker = psutil.Process(int(parent.stdout.readline()))
    parent.kill()
    parent.wait(10)
    assert_gone_within_2s(worker)


def test_worker_exits_when_its_input_closes(worker, hybrid_tiny):
    """Where there is no PDEATHSIG (macOS, Windows) the closed pipe is what tells the worker."""
    worker.load_model(str(hybrid_tiny))
    worker.send(generate(max_tokens=6000))
    wait_for(worker, p.TokenDelta)
    process = psutil.Process(worker.pid)
    worker.process.stdin.close()
    assert_gone_within_2s(process)


def test_shutdown_drain_finishes_the_running_request(worker, hybrid_tiny):
    worker.load_model(str(hybrid_tiny))
    command = generate(max_tokens=64)
    worker.send(command)
    worker.send(p.Shutdown(mode="drain"))
    end = wait_for(worker, p.Finished)
    assert end.finish_reason == "length" and end.timings.gen_n == 64
    assert worker.process.wait(10) == 0
