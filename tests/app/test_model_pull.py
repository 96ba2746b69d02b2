"""``hearth models pull`` as a real process against the local hub: progress, install, use by id,
cancel with SIGTERM and resume, offline, and removal (the HF cache file is deleted)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.fixtures.hub_catalogue import MODEL_ID, write_hub_catalogue
from tests.fixtures.local_hub import synthetic_bytes

pytest_plugins = ["tests.store.conftest_hub"]


@pytest.fixture
def env(hub, hearth_home, tmp_path):
    return {**os.environ, "HEARTH_HOME": str(hearth_home), "HF_HOME": str(tmp_path / "hf-home"),
            "HF_ENDPOINT": hub.url}


def hearth(env, *argv, timeout=120):
    return subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env,
                          timeout=timeout)


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_pull_reports_progress_installs_and_the_id_answers(hub, env, tmp_path, tiny_gguf_bytes, hybrid_tiny):
    env["HEARTH_CATALOGUE"] = str(write_hub_catalogue(hub, tmp_path, {"Q8_0": tiny_gguf_bytes}))
    pulled = hearth(env, "models", "pull", "--json", f"{MODEL_ID}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    lines = events(pulled.stdout)
    progress = [e["downloaded_bytes"] for e in lines if e["event"] == "progress"]
    done = lines[-1]
    assert progress == sorted(progress) and progress[-1] == len(tiny_gguf_bytes)
    assert done["event"] == "installed" and done["size_bytes"] == len(tiny_gguf_bytes)
    assert done["path"].startswith(env["HF_HOME"])  # the shared Hugging Face cache
    listing = json.loads(hearth(env, "models", "list", "--json").stdout)
    assert listing["catalogue"][0]["variants"][0]["installed_id"] == done["id"]
    by_id = hearth(env, "generate", "--model", MODEL_ID, "--temperature", "0", "--max-tokens", "5", "--json", "hi")
    by_path = hearth(env, "generate", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "5",
                     "--json", "hi")
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["token_ids"] == json.loads(by_path.stdout)["token_ids"]
    removed = hearth(env, "models", "rm", done["id"])
    assert removed.returncode == 0 and "freed" in removed.stdout
    assert not os.path.exists(done["path"])
    assert "not installed" in hearth(env, "info", "--model", MODEL_ID).stderr


def test_sigterm_cancels_a_pull_and_the_next_pull_resumes(hub, env, tmp_path):
    size = 4 << 20
    env["HEARTH_CATALOGUE"] = str(write_hub_catalogue(hub, tmp_path, {"Q4_0": synthetic_bytes(size)}))
    hub.throttle(2 << 20)
    process = subprocess.Popen([sys.executable, "-m", "app", "models", "pull", "--json", MODEL_ID],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in process.stdout:
        event = json.loads(line)
        if event["event"] == "progress" and event["downloaded_bytes"] > size // 8:
            process.send_signal(signal.SIGTERM)
            break
    rest = events(process.stdout.read())
    assert process.wait(30) == 1
    assert rest[-1]["event"] == "error" and rest[-1]["kind"] == "cancelled"
    hub.throttle(None)
    again = events(hearth(env, "models", "pull", "--json", MODEL_ID).stdout)[-1]
    assert again["event"] == "installed" and 0 < again["transferred_bytes"] < size


def test_offline_pull_says_a_connection_is_needed_and_list_still_works(hub, env, tmp_path, tiny_gguf_bytes):
    env["HEARTH_CATALOGUE"] = str(write_hub_catalogue(hub, tmp_path, {"Q8_0": tiny_gguf_bytes}))
    env["HF_HUB_OFFLINE"] = "1"
    pulled = hearth(env, "models", "pull", "--json", MODEL_ID, timeout=30)
    assert pulled.returncode == 1 and events(pulled.stdout)[-1]["kind"] == "offline"
    assert "connection" in pulled.stderr
    assert not hub.requests
    assert hearth(env, "models", "list", "--json").returncode == 0


def test_search_finds_gguf_repositories_on_the_hub_and_fails_fast_when_it_hangs(hub, env, tmp_path,
                                                                                 tiny_gguf_bytes):
    write_hub_catalogue(hub, tmp_path, {"Q8_0": tiny_gguf_bytes})
    hub.add_file("someone/Other-GGUF", "other.gguf", tiny_gguf_bytes)
    hub.add_file("someone/NotAModel", "README.md", b"hello", lfs=False)
    found = hearth(env, "models", "search", "--json", "tiny")
    assert found.returncode == 0, found.stderr
    assert [r["repo_id"] for r in json.loads(found.stdout)] == ["hearth-test/Tiny-GGUF"]
    everything = json.loads(hearth(env, "models", "search", "--json", "").stdout)
    assert {r["repo_id"] for r in everything} == {"hearth-test/Tiny-GGUF", "someone/Other-GGUF"}
    hub.hang()
    started = time.monotonic()
    stuck = hearth({**env, "HF_HUB_ETAG_TIMEOUT": "2"}, "models", "search", "tiny", timeout=60)
    assert stuck.returncode == 1 and "connection" in stuck.stderr
    assert 2 <= time.monotonic() - started < 30, "the hub client's metadata timeout bounds the wait"
