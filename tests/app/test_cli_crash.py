"""The real ``hearth`` command when llama.cpp crashes in its worker process (the test-only switch
HEARTH_TEST_CPU_FAULT kills the worker with a real signal while it loads a model or decodes): one
line that says what happened, the CPU build in use and what to do, or one JSON error object; and
Ctrl+C during an answer, which the worker must survive."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.backends.faults import FAULT_ENV
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.cpu_builds import auto_build
from tests.helpers.cli import (
    installed_hearth, press_ctrl_c_during, read_until, wait_for_the_model_in_its_worker, wait_for_the_worker_to_compute,
)

CRASHES = [  # the switch, the signal, its words in the message, what the command was doing
    pytest.param("load:*:SIGILL", "SIGILL", "illegal instruction", "while loading the embedded model", id="load-SIGILL"),
    pytest.param("decode:*:SIGSEGV", "SIGSEGV", "invalid memory access", "while writing the answer",
                 id="decode-SIGSEGV"),
]


@pytest.fixture(scope="module")
def build_in_use() -> str:
    """The CPU build a worker runs here (the session's CPU check)."""
    return auto_build()


def assert_one_crash_line(result: subprocess.CompletedProcess, words: str, build: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)  # not 132 / -4: the command survived
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("hearth: error: the inference library crashed"), line
    assert words in line and f"with the CPU build {build}" in line and "`hearth doctor`" in line, line
    return line


def assert_one_crash_object(result: subprocess.CompletedProcess, signal_name: str, words: str) -> dict:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert len(result.stdout.splitlines()) == 1, result.stdout
    error = json.loads(result.stdout)
    assert list(error) == ["error"] and set(error["error"]) == {"kind", "signal", "message"}, error
    assert error["error"]["kind"] == "engine_crashed" and error["error"]["signal"] == signal_name
    assert words in error["error"]["message"]
    assert result.stderr.splitlines() == [f"hearth: error: {error['error']['message']}"]
    return error["error"]


# -- a normal answer ------------------------------------------------------------------------------


def test_generate_prints_the_answer_it_streams(hearth_home):
    streamed = installed_hearth("generate", "--max-tokens", "8", "--temperature", "0", "Write a poem about the sea.")
    assert streamed.returncode == 0, streamed.stderr
    assert "Traceback" not in streamed.stderr
    printed = installed_hearth("generate", "--max-tokens", "8", "--temperature", "0", "--json", "Write a poem about the sea.")
    assert printed.returncode == 0, printed.stderr
    answer = json.loads(printed.stdout)
    assert answer["text"].strip() and len(answer["token_ids"]) == 8
    assert streamed.stdout == answer["text"] + "\n"


# -- crashes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault, signal_name, words, doing", CRASHES)
def test_a_crash_in_generate_is_one_line_naming_the_build_and_the_doctor(fault, signal_name, words, doing,
                                                                         hearth_home, build_in_use):
    result = installed_hearth("generate", "--max-tokens", "8", "Hello", **{FAULT_ENV: fault})
    line = assert_one_crash_line(result, words, build_in_use)
    assert f"({words}, {signal_name})" in line and doing in line
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("fault, signal_name, words, doing", CRASHES)
def test_a_crash_in_generate_json_is_one_error_object(fault, signal_name, words, doing, hearth_home, build_in_use):
    result = installed_hearth("generate", "--max-tokens", "8", "--json", "Hello", **{FAULT_ENV: fault})
    error = assert_one_crash_object(result, signal_name, words)
    assert f"with the CPU build {build_in_use}" in error["message"] and doing in error["message"]


def stored_branch(conversation_id: str, hearth_home: Path) -> list:
    db = open_database(database_path(hearth_home / "data"))
    try:
        return ConversationStore(db).current_branch(conversation_id)
    finally:
        db.close()


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_crash_in_send_says_so_and_keeps_the_users_message(as_json, hearth_home, build_in_use):
    message = "Where do otters sleep at night?"
    result = installed_hearth("send", "--new", "T", "--max-tokens", "8", *(["--json"] if as_json else []), message,
                    **{FAULT_ENV: "decode:*:SIGSEGV"})
    if as_json:
        assert_one_crash_object(result, "SIGSEGV", "invalid memory access")
    else:
        assert_one_crash_line(result, "invalid memory access", build_in_use)

    listed = installed_hearth("conversations", "--search", "otters", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    (conversation,) = json.loads(listed.stdout)
    assert conversation["title"] == "T"
    user, answer = stored_branch(conversation["id"], hearth_home)
    assert (user.role, user.content) == ("user", message)
    assert (answer.role, answer.status) == ("assistant", "interrupted")
    assert "invalid memory access" in answer.stats["interrupted_by"]


def test_the_safe_build_the_crash_line_suggests_does_run(hearth_home, build_in_use):
    """A crash only the build in use has (an instruction this CPU does not really run): the line's
    advice, HEARTH_CPU_VARIANT=safe, gives an answer."""
    fault = {FAULT_ENV: f"load:{build_in_use}:SIGILL"}
    crashed = installed_hearth("generate", "--max-tokens", "4", "Hello", **fault)
    assert "HEARTH_CPU_VARIANT=safe" in assert_one_crash_line(crashed, "illegal instruction", build_in_use)
    safe = installed_hearth("generate", "--max-tokens", "4", "--temperature", "0", "--json", "Hello",
                  HEARTH_CPU_VARIANT="safe", **fault)
    assert safe.returncode == 0, safe.stderr
    assert len(json.loads(safe.stdout)["token_ids"]) == 4


def test_an_unknown_cpu_build_is_one_line_listing_the_builds(hearth_home):
    result = installed_hearth("generate", "Hello", HEARTH_CPU_VARIANT="turbo9000", timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert "no CPU build named 'turbo9000'" in line and "sse42" in line and "auto or safe" in line


# -- Ctrl+C ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["streaming", "json"])
def test_ctrl_c_during_an_answer_stops_it_without_a_traceback(as_json, hearth_home):
    """Ctrl+C reaches the terminal's whole process group: the worker ignores it, the command stops
    the answer, keeps what was written (printed, or one JSON object saying ``cancelled``) and exits
    130, the shell's code for an interrupted command; never a traceback."""
    def writing(answering: subprocess.Popen) -> bytes:
        if not as_json:
            return read_until(answering.stdout, 40, timeout=300)
        wait_for_the_model_in_its_worker(answering.pid, timeout=300)  # nothing is printed until the end
        wait_for_the_worker_to_compute(answering.pid, cpu_seconds=3.0, timeout=300)  # the answer under way
        return b""

    answering, out, err = press_ctrl_c_during(
        ["generate", "--max-tokens", "2000", "--temperature", "0", *(["--json"] if as_json else []),
         "Write a very long story about a dragon who collects lighthouses."], writing)
    stderr = err.decode(errors="replace")
    assert "Traceback" not in stderr, stderr
    assert "SIGINT" not in stderr, "the worker died of the Ctrl+C"
    assert answering.returncode == 130, (answering.returncode, stderr)
    if as_json:
        reply = json.loads(out)
        assert reply["finish_reason"] == "cancelled" and reply["text"], reply
    else:
        assert len(out) >= 40 and out.endswith(b"\n")
