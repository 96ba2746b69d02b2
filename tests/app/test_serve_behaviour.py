"""How ``hearth serve`` behaves under pressure: keys, a full queue, a client that goes away, a worker
that dies, and addresses it will not bind without a key. Each with a server of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import openai
import pytest

from tests.helpers.cli import hearth
from tests.helpers.serve import http, serving, start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
MODEL = "default"
LONG = [{"role": "user", "content": "Write a very long story about a lighthouse keeper, chapter by chapter."}]


def long_stream(server):
    """A streamed answer of up to 4,000 tokens: minutes of work unless something stops it."""
    return server.client().chat.completions.create(model=MODEL, messages=LONG, max_tokens=4000, temperature=0,
                                                   stream=True)


def test_with_a_key_only_requests_that_carry_it_are_answered(tmp_path):
    with serving(tmp_path / "home", "--api-key", "s3cret-key") as server:
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="wrong-key").models.list()
        missing = http("GET", f"{server.base_url}/models", timeout=10)
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"
        assert [m.id for m in server.client(api_key="s3cret-key").models.list().data] == [MODEL]


def test_the_key_can_come_from_the_environment_instead_of_the_command_line(tmp_path):
    with serving(tmp_path / "home", HEARTH_API_KEY="from-env") as server:
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="other").models.list()
        assert server.client(api_key="from-env").models.list().data


def test_another_address_than_loopback_needs_a_key(tmp_path):
    refused = hearth("serve", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]  # one line
    assert "--api-key" in refused.stderr


def test_a_port_in_use_is_one_line_saying_so(tmp_path):
    with serving(tmp_path / "home") as server:
        port = server.base_url.rsplit(":", 1)[1].split("/")[0]
        taken = hearth("serve", "--port", port, timeout=60)
        assert taken.returncode == 1 and "Traceback" not in taken.stderr
        assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr and "--port" in taken.stderr


def test_a_full_queue_answers_429_with_retry_after_and_the_queued_request_is_still_answered(tmp_path):
    with serving(tmp_path / "home", "--max-queue", "1") as server:
        running = long_stream(server)
        next(iter(running))  # the engine is busy with it
        queued: list = []
        waiter = threading.Thread(target=lambda: queued.append(server.client().completions.create(
            model=MODEL, prompt="Hello", max_tokens=2, temperature=0)))
        waiter.start()
        time.sleep(1.0)
        full = http("POST", f"{server.base_url}/completions", timeout=30,
                    json_body={"model": MODEL, "prompt": "Hello", "max_tokens": 2})
        assert full.status_code == 429 and full.headers["retry-after"].isdigit()
        assert full.json()["error"]["code"] == "queue_full"
        running.close()  # the client goes away: its answer stops, the queued one runs
        waiter.join(timeout=120)
        assert queued and queued[0].choices[0].text is not None


def test_a_client_that_disconnects_mid_stream_stops_its_answer_at_once(tmp_path):
    with serving(tmp_path / "home") as server:
        stream = long_stream(server)
        for _, _chunk in zip(range(3), stream):
            pass
        stream.close()
        started = time.monotonic()
        after = server.client().completions.create(model=MODEL, prompt="Hi", max_tokens=1, temperature=0)
        assert after.choices[0].finish_reason == "length"
        assert time.monotonic() - started < 20  # 4,000 tokens would take minutes


def test_a_worker_killed_mid_request_answers_503_and_the_server_recovers(tmp_path):
    with serving(tmp_path / "home") as server:
        stream = long_stream(server)
        chunks = iter(stream)
        while not next(chunks).choices[0].delta.content:  # the worker is writing the answer
            pass
        os.kill(server.worker().pid, signal.SIGKILL)
        with pytest.raises(openai.APIError) as failed:
            for _chunk in chunks:
                pass
        assert "restarting" in str(failed.value)
        deadline = time.monotonic() + 120
        while http("GET", f"{server.root}/health", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.5)
        answer = server.client().completions.create(model=MODEL, prompt="Hello", max_tokens=2, temperature=0)
        assert answer.usage.completion_tokens == 2
        assert any("a new one serves the model" in line for line in server.log_lines())


def test_a_request_that_waits_too_long_or_writes_too_long_ends_with_an_error(tmp_path):
    """Limits of 300 s waiting and 600 s writing, shortened by the test switch to 1 s and 3 s."""
    with serving(tmp_path / "home", HEARTH_TEST_SERVE_LIMITS="1,3") as server:
        url = f"{server.base_url}/chat/completions"
        running = long_stream(server)  # writes until its limit
        next(iter(running))
        started = time.monotonic()
        waited = http("POST", url, json_body={"model": MODEL, "messages": LONG, "max_tokens": 2}, timeout=60)
        assert waited.status_code == 503 and waited.json()["error"]["code"] == "queue_timeout"
        assert time.monotonic() - started < 3  # told after its own limit, not after the running answer
        with pytest.raises(openai.APIError, match="ran past 3 s"):
            for _chunk in running:
                pass
        ran = http("POST", url, json_body={"model": MODEL, "messages": LONG, "max_tokens": 4000, "temperature": 0},
                   timeout=60)  # greedy, as the stream above: an answer that runs past 3 s
        assert ran.status_code == 504 and ran.json()["error"]["code"] == "answer_timeout"
        after = server.client().completions.create(model=MODEL, prompt="Hi", max_tokens=1, temperature=0)
        assert after.usage.completion_tokens == 1


def test_a_worker_that_died_while_idle_is_replaced_before_the_next_request(tmp_path):
    with serving(tmp_path / "home") as server:
        worker = server.worker()
        worker.kill()
        worker.wait(10)
        answer = server.client().completions.create(model=MODEL, prompt="Hello", max_tokens=2, temperature=0)
        assert answer.usage.completion_tokens == 2  # nothing was in flight: the request is simply answered
        assert server.worker().pid != worker.pid
        assert any("a new one serves the model" in line for line in server.log_lines())


def serve_folders(home) -> list:
    return sorted((home / "cache").glob("serve-*"))


def test_a_stopped_server_leaves_no_folder_behind_and_clears_those_of_killed_ones(tmp_path):
    home = tmp_path / "home"
    killed = start_server(home)
    assert len(serve_folders(home)) == 1
    killed.process.kill()  # no cleanup possible: its folder stays
    killed.process.wait()
    server = start_server(home)  # clears the dead one's folder as it starts
    assert len(serve_folders(home)) == 1
    server.stop()  # SIGTERM: uvicorn's graceful stop, then the cleanup
    assert server.process.returncode == 0
    assert serve_folders(home) == []


def test_the_server_ends_when_the_program_that_started_it_has_gone(tmp_path):
    parent = subprocess.Popen(["sleep", "600"])
    with serving(tmp_path / "home", HEARTH_SERVE_PARENT_PID=str(parent.pid)) as server:
        parent.kill()
        parent.wait()
        server.process.wait(timeout=30)  # it notices within a second or two, and stops as on SIGTERM
        assert serve_folders(tmp_path / "home") == []


def test_with_allow_switch_every_installed_model_is_listed_and_a_request_loads_the_one_it_names(tmp_path,
                                                                                                hybrid_tiny):
    home = tmp_path / "home"
    imported = hearth("models", "import", "--json", str(hybrid_tiny), HEARTH_HOME=str(home), timeout=120)
    assert imported.returncode == 0, imported.stderr
    other = json.loads(imported.stdout)["id"]
    with serving(home, "--allow-switch") as server:
        client = server.client()
        assert [m.id for m in client.models.list().data] == [MODEL, other]
        hybrid = client.completions.create(model=other, prompt="Hello", max_tokens=3, temperature=0)
        assert hybrid.model == other and hybrid.usage.completion_tokens == 3
        assert http("GET", f"{server.root}/health").json()["model"] == other
        back = client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0)
        assert back.model == MODEL and back.usage.completion_tokens == 3
    with serving(tmp_path / "home2") as fixed:
        assert [m.id for m in fixed.client().models.list().data] == [MODEL]  # without the flag, only the served one
