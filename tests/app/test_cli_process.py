"""The installed ``hearth`` entry point and ``python -m app`` work as separate processes."""

import json
import os
import pty
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cli import HEARTH


def test_hearth_entry_point_generates_json(hybrid_tiny, hearth_home):
    result = subprocess.run(
        [str(HEARTH), "generate", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "6", "--json", "hi"],
        capture_output=True, text=True, timeout=120, env={"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    generated = json.loads(result.stdout)
    assert set(generated) == GENERATE_KEYS  # scripts outside the repo read these keys
    assert len(generated["token_ids"]) == 6


GENERATE_KEYS = {"text", "reasoning", "token_ids", "finish_reason", "timings", "draft", "devices", "n_ctx", "cut_off",
                 "sampling"}  # sampling: added in issue 51
SNAPSHOT_KEYS = {"restored", "restored_tokens", "prefilled_tokens", "saved_bytes"}


def test_send_json_has_the_generate_keys_plus_the_conversation_and_its_snapshot(hybrid_tiny, hearth_home):
    env = {"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"}

    def send(*where: str, text: str) -> dict:
        sent = subprocess.run([str(HEARTH), "send", *where, "--model", str(hybrid_tiny), "--temperature", "0",
                               "--max-tokens", "5", "--json", text], capture_output=True, text=True, timeout=120,
                              env=env)
        assert sent.returncode == 0, sent.stderr
        return json.loads(sent.stdout)

    first = send("--new", "Rivers", text="Tell me about rivers.")
    assert set(first) == GENERATE_KEYS | {"conversation_id", "message_id", "status", "snapshot", "context"}
    assert set(first["snapshot"]) == SNAPSHOT_KEYS
    assert not first["snapshot"]["restored"] and first["snapshot"]["saved_bytes"] > 0
    second = send("--conversation", first["conversation_id"], text="And lakes?")
    assert second["conversation_id"] == first["conversation_id"] and second["message_id"] != first["message_id"]
    assert second["snapshot"]["restored"] and second["snapshot"]["restored_tokens"] > 0
    listed = subprocess.run([str(HEARTH), "conversations", "--json"], capture_output=True, text=True, timeout=60,
                            env=env)
    assert listed.returncode == 0, listed.stderr
    (conversation,) = json.loads(listed.stdout)
    assert conversation["id"] == first["conversation_id"] and conversation["title"] == "Rivers"
    assert set(conversation) == {"id", "title", "model", "created_at", "updated_at", "leaf_id"}
    assert conversation["leaf_id"] == second["message_id"]


def test_terminal_chat_answers_and_quits(hybrid_tiny, hearth_home):
    result = subprocess.run(
        [sys.executable, "-m", "app", "chat", "--model", str(hybrid_tiny), "--max-tokens", "5", "--seed", "3"],
        input="hello there\nand again\n/exit\n", capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("> ") == 3  # two answers, then the prompt that read /exit


def test_bad_model_exits_1_with_one_line(tmp_path):
    result = subprocess.run([str(HEARTH), "info", "--model", str(tmp_path / "x.gguf")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("hearth: error: Cannot load model") and result.stderr.count("\n") == 1


def test_doc_load_then_questions_start_from_the_document(hybrid_tiny, hearth_home, tmp_path):
    env = {"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"}
    document = tmp_path / "notes.md"
    document.write_text("# Notes\n\n" + "The bridge by the old mill was rebuilt in spring. " * 60, encoding="utf-8")
    loaded = subprocess.run([str(HEARTH), "doc", "load", "--model", str(hybrid_tiny), "--json", str(document)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert loaded.returncode == 0, loaded.stderr
    result = json.loads(loaded.stdout)
    assert {"conversation_id", "document_id", "tokens", "timings"} <= set(result)
    assert result["tokens"] > 300 and result["timings"]["prompt_n"] == result["tokens"]
    asked = subprocess.run([str(HEARTH), "send", "--conversation", result["conversation_id"], "--model",
                            str(hybrid_tiny), "--temperature", "0", "--max-tokens", "4", "--json", "When?"],
                           capture_output=True, text=True, timeout=120, env=env)
    assert asked.returncode == 0, asked.stderr
    snapshot = json.loads(asked.stdout)["snapshot"]
    assert snapshot["restored"] and snapshot["restored_tokens"] >= result["tokens"] and snapshot["prefilled_tokens"] < 30


def test_a_question_about_a_document_drafts_by_prompt_lookup_by_default(hearth_home, tmp_path):
    """The app's defaults (the embedded model, --draft auto): the answer quotes the document, and
    prompt lookup drafts the quote from it."""
    env = {"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"}
    document = tmp_path / "notes.md"
    document.write_text("# Notes\n\n" + "The bridge by the old mill was rebuilt in spring. " * 60, encoding="utf-8")
    loaded = subprocess.run([str(HEARTH), "doc", "load", "--json", str(document)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert loaded.returncode == 0, loaded.stderr
    asked = subprocess.run([str(HEARTH), "send", "--conversation", json.loads(loaded.stdout)["conversation_id"],
                            "--temperature", "0", "--max-tokens", "40", "--json",
                            "Repeat the first sentence of the document."],
                           capture_output=True, text=True, timeout=300, env=env)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert "old mill" in answer["text"], answer["text"]
    draft = answer["draft"]
    assert draft["kind"] == "lookup", f"document questions are not drafted by prompt lookup by default: {draft}"
    assert draft["drafted"] > 0 and draft["accepted"] > 0, f"prompt lookup drafted nothing of the quote: {draft}"


def test_doc_load_refuses_a_binary_file_in_one_line(hearth_home, tmp_path):
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 40)
    result = subprocess.run([str(HEARTH), "doc", "load", str(binary)], capture_output=True, text=True, timeout=60,
                            env={"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1 and "blob.bin" in result.stderr and result.stderr.count("\n") == 1


def wait_for_output(stream, marker: bytes, timeout: float) -> bytes:
    """Read ``stream`` (a pipe) until ``marker`` appears; what was read."""
    seen, deadline = b"", time.monotonic() + timeout
    while marker not in seen:
        assert time.monotonic() < deadline, f"no {marker!r} within {timeout} s: {seen!r}"
        chunk = stream.read1(4096)
        assert chunk, f"the output ended before {marker!r}: {seen!r}"
        seen += chunk
    return seen


def test_ctrl_c_while_a_document_is_read_adds_nothing_says_so_on_a_line_of_its_own_and_exits_130(
        hybrid_tiny, hearth_home, tmp_path):
    env = {"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"}
    words = "river stone light house garden winter market letter window music paper forest bridge".split()
    rng = random.Random(2)
    document = tmp_path / "long.txt"
    document.write_text("\n".join(" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(120)))
    terminal, stderr = pty.openpty()  # a terminal's stderr: the progress is one line rewritten in place
    loading = subprocess.Popen([str(HEARTH), "doc", "load", "--model", str(hybrid_tiny), str(document)],
                               stdout=subprocess.PIPE, stderr=stderr, env=env)
    os.close(stderr)
    try:
        seen = read_terminal_until(terminal, b"reading ", timeout=120)
        loading.send_signal(signal.SIGINT)
        loading.wait(timeout=120)
        seen += read_terminal_until(terminal, None, timeout=10)
    finally:
        loading.kill()
        os.close(terminal)
    assert loading.returncode == 130, seen
    lines = seen.decode().replace("\r\n", "\n").split("\n")
    said = [line for line in lines if "long.txt" in line]
    assert said == ["hearth: stopped reading long.txt; nothing was added"], lines
    assert lines[lines.index(said[0]) - 1].lstrip("\r").startswith("reading "), "the progress line was ended first"
    listed = subprocess.run([str(HEARTH), "conversations", "--json"], capture_output=True, text=True, timeout=60,
                            env=env)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], "no conversation was left behind"


def read_terminal_until(terminal: int, marker: bytes | None, timeout: float) -> bytes:
    """Read a pty's master side until ``marker`` appears (None: until the other side is closed)."""
    seen, deadline = b"", time.monotonic() + timeout
    while marker is None or marker not in seen:
        assert time.monotonic() < deadline, f"no {marker!r} within {timeout} s: {seen!r}"
        if not select.select([terminal], [], [], 0.2)[0]:
            continue
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # EIO: the command and its worker closed the terminal
            chunk = b""
        if not chunk:
            assert marker is None, f"the output ended before {marker!r}: {seen!r}"
            return seen
        seen += chunk
    return seen