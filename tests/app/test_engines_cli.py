"""``hearth engines add|list|test|rm`` and ``--engine NAME``, as a user runs them, against a real
``hearth serve`` (SmolLM2, with an API key) on 127.0.0.1 as the remote engine.

Every command gets a secret store: a real keyring backend on a file of the test's
(:mod:`tests.helpers.memory_keyring`), or the one a system without a store has, so no test touches
the user's own keychain.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess

import pytest

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.helpers.cli import ROOT, command, error_line, hearth
from tests.helpers.documents import write_document
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.memory_keyring import keyring_env
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
SERVER_KEY = "sk-hearth-serve-test"
TEST_KEYS = {"ok", "latency_ms", "models", "tok_s", "error"}
GREEDY = ("--temperature", "0", "--max-tokens", "12")
LEAVES = "hearth: answered on gpu: messages leave this computer"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("remote-home"), HEARTH_API_KEY=SERVER_KEY)
    yield running
    running.stop()


@pytest.fixture
def secrets(tmp_path):
    return tmp_path / "secrets.json"


def run(secrets, *args: str, **env: str):
    """``hearth ARGS`` with the test's secret store (None: a system without one)."""
    return hearth(*args, timeout=300, **keyring_env(secrets), **env)


def add(secrets, server, *flags: str, name: str = "gpu", key: str = SERVER_KEY):
    added = run(secrets, "engines", "add", name, "--url", server.base_url, "--api-key-env", "GPU_KEY", *flags,
                GPU_KEY=key)
    assert added.returncode == 0, added.stderr
    return added


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_add_list_test_and_remove_an_engine_with_its_key_in_the_secret_store(server, secrets, hearth_home):
    added = add(secrets, server)
    assert "secret store" in added.stdout and SERVER_KEY not in added.stdout + added.stderr
    assert "plain http://" in added.stderr  # 127.0.0.1: allowed, with a warning
    assert SERVER_KEY in secrets.read_text()
    assert SERVER_KEY not in (hearth_home / "config" / "engines.json").read_text()

    listed = run(secrets, "engines", "list", "--json")
    assert json.loads(listed.stdout) == [{"name": "gpu", "url": server.base_url, "model": "", "context": 0,
                                          "key": "keyring"}]
    assert SERVER_KEY not in listed.stdout and "gpu" in run(secrets, "engines", "list").stdout

    tested = run(secrets, "engines", "test", "gpu", "--json")
    assert tested.returncode == 0, tested.stderr
    result = json.loads(tested.stdout)
    assert TEST_KEYS <= set(result) and result["ok"] is True and result["error"] is None
    assert result["models"] == ["default"] and result["latency_ms"] > 0 and result["tok_s"] > 0

    assert run(secrets, "engines", "rm", "gpu").returncode == 0
    assert json.loads(run(secrets, "engines", "list", "--json").stdout) == []
    assert SERVER_KEY not in secrets.read_text()
    assert "no remote engine called 'gpu'" in error_line(run(secrets, "engines", "test", "gpu"))


def test_an_engine_of_the_same_name_is_refused_unless_replaced(server, secrets):
    add(secrets, server)
    line = error_line(run(secrets, "engines", "add", "gpu", "--url", server.base_url))
    assert "already an engine called gpu" in line
    replaced = run(secrets, "engines", "add", "GPU", "--url", server.base_url, "--model", "default", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(run(secrets, "engines", "list", "--json").stdout)[0]["key"] == "none"
    assert SERVER_KEY not in secrets.read_text()


def test_an_unreachable_engine_tests_not_ok_with_a_sentence(secrets):
    added = run(secrets, "engines", "add", "gone", "--url", f"http://127.0.0.1:{closed_port()}/v1")
    assert added.returncode == 0, added.stderr
    tested = run(secrets, "engines", "test", "gone", "--json")
    result = json.loads(tested.stdout)
    assert TEST_KEYS <= set(result) and result["ok"] is False and result["models"] == []
    assert result["error"].startswith("cannot reach the engine gone") and result["latency_ms"] is None
    assert result["error"] in error_line(tested)


def test_a_wrong_key_is_an_authentication_sentence(server, secrets):
    add(secrets, server, key="sk-wrong")
    tested = run(secrets, "engines", "test", "gpu", "--json")
    result = json.loads(tested.stdout)
    assert result["ok"] is False and "refused the API key (HTTP 401)" in result["error"]
    error_line(tested)
    generated = run(secrets, "generate", "--engine", "gpu", "--json", "hi")
    assert "refused the API key" in error_line(generated)
    assert json.loads(generated.stdout)["error"]["kind"] == "remote_auth"


def test_generate_answers_on_the_engine_as_the_server_answers_its_own_client(server, secrets):
    add(secrets, server)
    generated = run(secrets, "generate", "--engine", "gpu", *GREEDY, "--json", "Name a colour.")
    assert generated.returncode == 0, generated.stderr
    answer = json.loads(generated.stdout)
    assert answer["devices"]["decode"] == "remote" and answer["devices"]["prefill"] == "remote"
    assert generated.stderr.splitlines() == [LEAVES]
    direct = server.client(api_key=SERVER_KEY).chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Name a colour."}], temperature=0, max_tokens=12)
    assert answer["text"] == direct.choices[0].message.content and answer["text"].strip()
    streamed = run(secrets, "generate", "--engine", "gpu", *GREEDY, "Name a colour.")
    assert streamed.stdout.rstrip("\n") == answer["text"] and LEAVES in streamed.stderr


def test_send_on_the_engine_stores_the_answers_and_sends_the_whole_conversation(server, secrets, hearth_home):
    add(secrets, server)
    first = run(secrets, "send", "--engine", "gpu", *GREEDY, "--new", "remote", "--json", "My name is Ada.")
    assert first.returncode == 0, first.stderr
    sent = json.loads(first.stdout)
    assert sent["status"] == "done" and sent["devices"]["decode"] == "remote" and LEAVES in first.stderr
    second = run(secrets, "send", "--engine", "gpu", *GREEDY, "--conversation", sent["conversation_id"], "--json",
                 "What is my name?")
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    branch = store.current_branch(sent["conversation_id"])
    assert [(m.role, m.status) for m in branch] == [("user", "done"), ("assistant", "done")] * 2
    assert [branch[1].content, branch[3].content] == [sent["text"], again["text"]]
    assert branch[3].stats["model"] == "default"  # the server's model id
    assert branch[1].stats["engine"] == branch[3].stats["engine"] == "gpu"  # which engine answered each
    assert branch[3].stats["remote"]["cached_tokens"] > 0  # another Hearth restored the conversation's prefix
    assert again["remote"] == branch[3].stats["remote"]  # and send --json says so too
    history = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": sent["text"]},
               {"role": "user", "content": "What is my name?"}]
    direct = server.client(api_key=SERVER_KEY).chat.completions.create(
        model="default", messages=history, temperature=0, max_tokens=12)
    assert again["text"] == direct.choices[0].message.content


def test_chat_on_the_engine_answers_in_the_terminal(server, secrets):
    add(secrets, server)
    chatted = subprocess.run(command("chat", "--engine", "gpu", *GREEDY), cwd=ROOT, input="Name a colour.\n/exit\n",
                             capture_output=True, text=True, timeout=300, env={**os.environ, **keyring_env(secrets)})
    assert chatted.returncode == 0, chatted.stderr
    direct = server.client(api_key=SERVER_KEY).chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Name a colour."}], temperature=0, max_tokens=12)
    assert chatted.stdout.startswith("Chatting with default on gpu.")
    assert direct.choices[0].message.content in chatted.stdout and LEAVES in chatted.stderr


def test_a_document_loaded_on_the_engine_is_asked_about_there(server, secrets, tmp_path, hearth_home):
    add(secrets, server)
    notes = write_document(tmp_path / "notes.txt", 60)
    loaded = run(secrets, "doc", "load", "--engine", "gpu", "--json", str(notes))
    assert loaded.returncode == 0, loaded.stderr
    document = json.loads(loaded.stdout)
    assert document["tokens"] > 60 and LEAVES in loaded.stderr
    asked = run(secrets, "send", "--engine", "gpu", *GREEDY, "--conversation", document["conversation_id"], "--json",
                "Which words come up most?")
    assert asked.returncode == 0, asked.stderr
    branch = ConversationStore(open_database(database_path(hearth_home / "data"))).current_branch(
        document["conversation_id"])
    assert branch[0].content.count("river") == notes.read_text().count("river") and branch[-1].status == "done"
    assert branch[-1].content == json.loads(asked.stdout)["text"]


def test_a_document_longer_than_the_engines_context_is_refused_with_the_numbers(server, secrets, tmp_path,
                                                                                  hearth_home):
    add(secrets, server)
    book = write_document(tmp_path / "book.txt", 12_000)  # ~24k tokens estimated; the served context is 8k at most
    refused = run(secrets, "doc", "load", "--engine", "gpu", str(book))
    assert refused.returncode == 1 and refused.stderr.splitlines()[0] == LEAVES
    line = refused.stderr.splitlines()[-1]
    assert "Traceback" not in refused.stderr and len(refused.stderr.splitlines()) == 2
    assert "the context of gpu leaves room for" in line and "--part first" in line and "memory" not in line
    assert ConversationStore(open_database(database_path(hearth_home / "data"))).list() == []  # nothing was kept


def test_without_a_secret_store_the_key_is_read_from_its_variable_or_kept_in_a_private_file(server, hearth_home):
    added = add(None, server)
    assert "No secret store" in added.stdout and "environment variable GPU_KEY" in added.stdout
    assert json.loads(run(None, "engines", "list", "--json").stdout)[0]["key"] == "env:GPU_KEY"
    assert json.loads(run(None, "engines", "test", "gpu", "--json", GPU_KEY=SERVER_KEY).stdout)["ok"] is True
    assert "environment variable GPU_KEY, which is not set" in error_line(run(None, "generate", "--engine", "gpu", "hi"))

    add(None, server, "--key-file", "--replace")
    key_file = hearth_home / "config" / "engine_keys.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and SERVER_KEY in key_file.read_text()
    assert json.loads(run(None, "engines", "test", "gpu", "--json").stdout)["ok"] is True
    assert run(None, "engines", "rm", "gpu").returncode == 0 and SERVER_KEY not in key_file.read_text()


def test_what_cannot_be_used_is_one_line(secrets):
    assert "use https://" in error_line(run(secrets, "engines", "add", "far", "--url", "http://8.8.8.8/v1"))
    assert "is not set" in error_line(run(secrets, "engines", "add", "gpu", "--url", "http://127.0.0.1:9/v1",
                                          "--api-key-env", "NO_SUCH_VARIABLE_HERE"))
    unknown = run(secrets, "generate", "--engine", "nope", "--json", "hi")
    assert "`hearth engines list`" in error_line(unknown)
    assert json.loads(unknown.stdout)["error"]["kind"] == "engine_not_found"
    assert "`hearth engines list`" in error_line(run(secrets, "send", "--engine", "nope", "--new", "x", "hi"))
    assert "`hearth engines list`" in error_line(run(secrets, "engines", "rm", "nope"))


def test_a_busy_engine_is_waited_for_and_said_on_stderr(server, secrets):
    with FaultProxy(server.base_url) as proxy:
        added = run(secrets, "engines", "add", "gpu", "--url", proxy.base_url, "--api-key-env", "GPU_KEY",
                    GPU_KEY=SERVER_KEY)
        assert added.returncode == 0, added.stderr
        proxy.status(503, retry_after=0, times=1, path="chat")
        waited = run(secrets, "generate", "--engine", "gpu", *GREEDY, "--json", "Say hi.",
                     HEARTH_TEST_REMOTE_RETRY="3,0.1")  # the test switch: 3 tries, 0.1 s first wait
        assert waited.returncode == 0, waited.stderr
        assert waited.stderr.splitlines() == [
            LEAVES, "hearth: the engine gpu is not available right now (HTTP 503) (it said: fault proxy: HTTP 503 "
                    "(Service Unavailable)); trying again in 0.1 s (try 2 of 3)"]
        assert json.loads(waited.stdout)["text"]
        proxy.status(503, retry_after=0, path="chat")  # never available: the tries end, one error line
        refused = run(secrets, "generate", "--engine", "gpu", *GREEDY, "Say hi.", HEARTH_TEST_REMOTE_RETRY="3,0.1")
        assert refused.returncode == 1 and refused.stderr.splitlines()[-1].startswith(
            "hearth: error: the engine gpu is not available right now (HTTP 503)")
        assert sum("chat" in r.path for r in proxy.requests) == 2 + 3
