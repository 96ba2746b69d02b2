"""A new user's first hour (issue 17), through the real ``hearth`` command: Ctrl+C in ``send`` keeps
the answer and its snapshot, empty messages are refused before anything is stored, ``chat`` names
the model as the app does, a document loaded twice points to its conversation, and a read's
progress in a log is lines, not carriage returns."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from app.surfaces.cli.document_commands import ReadingProgress
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.installed import EMBEDDED_NAME
from tests.helpers.cli import (
    HEARTH, installed_hearth, press_ctrl_c_during, read_until, wait_for_the_worker_to_compute,
)
from tests.helpers.documents import write_document


def conversations(home) -> ConversationStore:
    return ConversationStore(open_database(database_path(home / "data")))


# -- 2. Ctrl+C in `hearth send` --------------------------------------------------------------------

def wait_for_an_answer_being_written(home, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (home / "data" / "hearth.db").exists():
            store = conversations(home)
            try:
                if any(m.status == "generating" for c in store.list() for m in store.current_branch(c.id)):
                    return
            finally:
                store.db.close()
        time.sleep(0.2)
    raise AssertionError("the command never started its answer")


def _send_and_stop(home, *args: str, as_json: bool) -> tuple[subprocess.Popen, str, str]:
    """Start ``hearth send …``, press Ctrl+C once it is writing; (the process, stdout, stderr)."""
    def writing(sending: subprocess.Popen) -> bytes:
        if not as_json:
            return read_until(sending.stdout, 40, timeout=300)
        wait_for_an_answer_being_written(home, timeout=120)  # nothing is printed until the end
        wait_for_the_worker_to_compute(sending.pid, cpu_seconds=1.0, timeout=120)  # some tokens
        return b""

    sending, out, err = press_ctrl_c_during(
        ["send", "--max-tokens", "2000", "--temperature", "0", *(["--json"] if as_json else []), *args], writing)
    return sending, out.decode(), err.decode(errors="replace")


@pytest.mark.parametrize("as_json", [False, True], ids=["streaming", "json"])
def test_ctrl_c_in_send_keeps_the_answer_stopped_with_its_snapshot_and_the_next_message_continues(
        as_json, hearth_home):
    sending, out, err = _send_and_stop(hearth_home, "--new", "Dragons", "Write a very long story about a dragon.",
                                       as_json=as_json)
    assert "Traceback" not in err and sending.returncode == 130, (sending.returncode, err)
    store = conversations(hearth_home)
    (conversation,) = store.list()
    user, answer = store.current_branch(conversation.id)
    assert (answer.role, answer.status) == ("assistant", "stopped")
    assert answer.content and answer.stats["snapshot"]["saved_bytes"] > 0, "kept, like any turn end"
    assert answer.stats["model"] == EMBEDDED_NAME, "the window names the model that wrote it"
    if as_json:
        reply = json.loads(out)
        assert reply["finish_reason"] == "cancelled" and reply["status"] == "stopped"
        assert reply["text"] == answer.content and reply["message_id"] == answer.id
        assert reply["conversation_id"] == conversation.id and reply["snapshot"]["saved_bytes"] > 0
    else:
        assert out.rstrip("\n") == answer.content, "what was printed is what was kept"

    follow = installed_hearth("send", "--conversation", conversation.id, "--max-tokens", "4", "--json", "Go on.")
    assert follow.returncode == 0, follow.stderr
    snapshot = json.loads(follow.stdout)["snapshot"]
    assert snapshot["restored"], "the next message starts from the stopped turn's snapshot"
    assert snapshot["prefilled_tokens"] < 30, "only the new message is read"
    branch = store.current_branch(conversation.id)
    assert [m.id for m in branch[:2]] == [user.id, answer.id] and branch[2].content == "Go on."


# -- 8. Empty messages ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ("send", "--new", "Empty", ""),
    ("send", "--new", "Blank", "   \n\t "),
    ("generate", "   "),
    ("generate", "--raw", ""),
], ids=["send-empty", "send-blank", "generate-blank", "generate-raw-empty"])
def test_an_empty_message_is_refused_and_nothing_is_stored(argv, hearth_home):
    refused = installed_hearth(*argv)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("hearth: error: the ") and "is empty" in refused.stderr, refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    as_json = installed_hearth(*argv[:1], "--json", *argv[1:])
    assert json.loads(as_json.stdout)["error"]["kind"] == "empty_message"
    if (hearth_home / "data").exists():
        assert conversations(hearth_home).list() == [], "no empty turn was saved"


@pytest.mark.parametrize("flags", [("--draft", "bogus"), ("--draft", "model:nothing-installed"),
                                   ("--draft-max", "1000"), ("--temperature", "-1")])
def test_a_refused_flag_leaves_no_conversation_behind(flags, hearth_home):
    refused = installed_hearth("send", "--new", "Drafts", *flags, "Hello?")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.startswith(f"hearth: error: {flags[0]}") or flags[0] == "--temperature", refused.stderr
    if (hearth_home / "data").exists():
        assert conversations(hearth_home).list() == [], "the message was refused before anything was stored"


# -- 12. The model's name in `hearth chat` --------------------------------------------------------

def test_chat_names_the_embedded_model_as_the_app_does(hearth_home):
    chat = subprocess.run([str(HEARTH), "chat", "--max-tokens", "4"], input="/exit\n", capture_output=True,
                          text=True, timeout=300)
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.startswith(f"Chatting with {EMBEDDED_NAME}."), chat.stdout[:200]


def test_chat_names_a_model_file_by_its_file_name_not_its_metadata(hearth_home, hybrid_tiny):
    chat = subprocess.run([str(HEARTH), "chat", "--model", str(hybrid_tiny), "--max-tokens", "4"], input="/exit\n",
                          capture_output=True, text=True, timeout=300)
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.startswith(f"Chatting with {hybrid_tiny.stem}."), chat.stdout[:200]


# -- 9. The same document twice; 17. progress in a log ---------------------------------------------

def test_loading_the_same_document_again_points_to_its_conversation_and_again_names_the_copy_apart(
        hearth_home, tmp_path):
    report = write_document(tmp_path / "report.txt", 300)
    first = installed_hearth("doc", "load", "--json", str(report))
    assert first.returncode == 0, first.stderr
    loaded = json.loads(first.stdout)
    assert loaded["loaded_before"] is False and loaded["tokens"] > 0

    second = installed_hearth("doc", "load", str(report))
    assert second.returncode == 0, second.stderr
    assert "already loaded" in second.stderr and loaded["conversation_id"] in second.stderr and "--again" in second.stderr
    assert "reading" not in second.stderr, "nothing was read again"
    again_json = json.loads(installed_hearth("doc", "load", "--json", str(report)).stdout)
    assert again_json["loaded_before"] is True and again_json["conversation_id"] == loaded["conversation_id"]
    assert again_json["tokens"] == loaded["tokens"]

    started = time.monotonic()
    third = installed_hearth("doc", "load", "--again", str(report))
    took = time.monotonic() - started
    assert third.returncode == 0, third.stderr
    titles = sorted(c.title for c in conversations(hearth_home).list())
    assert titles == ["report.txt", "report.txt (2)"]

    progress = [line for line in third.stderr.splitlines() if line.startswith("reading ")]
    assert progress and "\r" not in third.stderr, "a log gets whole lines, not carriage returns"
    assert len(progress) <= took / ReadingProgress.LOG_EVERY_S + 2, "a line every few seconds, not one per update"
