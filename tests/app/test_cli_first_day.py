"""A new user's first day with the ``hearth`` command (issue 31, points 1, 9 and 13): ``hearth app``
opens the window and ``--help`` says so; ``hearth chat`` is saved like the window's conversations and
continued with ``--conversation``; an id's first characters name it, as in git; ``conversations``
and ``send --new`` say what they did; and the one-line messages say what is true where the user is.

Only the chat and send tests answer, on the embedded model, a few tokens each; the rest stop
before any model is loaded."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from app.surfaces.serve.main import what_to_do_when_unable_to_listen
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from app.services.extract import DocumentError, extract_text
from tests.helpers.cli import HEARTH, error_line, hearth, installed_hearth

SHORT = ("--max-tokens", "4", "--temperature", "0")


def stored(home: Path) -> ConversationStore:
    return ConversationStore(open_database(database_path(home / "data")))


def chat(*args: str, typed: str) -> subprocess.CompletedProcess:
    """``hearth chat`` with ``typed`` as what the user types (then end of input, as Ctrl+D)."""
    return subprocess.run([str(HEARTH), "chat", *SHORT, *args], input=typed, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


# -- 9. hearth chat is saved, and continued ---------------------------------------------------------

def test_a_terminal_chat_is_saved_and_continued_from_its_snapshot_by_the_first_characters_of_its_id(hearth_home):
    first = chat("--new", "Ada", typed="My name is Ada.\n/exit\n")
    assert first.returncode == 0, first.stderr
    store = stored(hearth_home)
    (conversation,) = store.list()
    assert conversation.title == "Ada" and conversation.model == "default"
    question, answer = store.current_branch(conversation.id)
    assert (question.role, question.content) == ("user", "My name is Ada.")
    assert answer.role == "assistant" and answer.status == "done" and answer.content
    assert answer.content in first.stdout, "what was printed is what was kept"
    assert answer.stats["snapshot"]["saved_bytes"] > 0, "the turn's end is kept, as the window keeps it"
    assert f"saved as conversation {conversation.id}" in first.stderr

    listed = installed_hearth("conversations")
    assert listed.stdout.startswith(conversation.id) and "Ada" in listed.stdout

    again = chat("--conversation", conversation.id[:6], typed="What is my name?\n")
    assert again.returncode == 0, again.stderr
    assert "Continuing “Ada” (2 messages so far)." in again.stdout
    assert [c.id for c in store.list()] == [conversation.id], "no second conversation"
    branch = store.current_branch(conversation.id)
    assert [m.content for m in branch[:3]] == ["My name is Ada.", answer.content, "What is my name?"]
    assert branch[3].status == "done" and branch[3].parent_id == branch[2].id
    snapshot = branch[3].stats["snapshot"]
    assert snapshot["restored"] and snapshot["restored_tokens"] > 0, "it started from the first chat's state"


def test_send_new_says_the_new_conversations_id_on_stderr_and_keeps_stdout_the_answer(hearth_home):
    sent = installed_hearth("send", "--new", "Greeting", *SHORT, "Hello!")
    assert sent.returncode == 0, sent.stderr
    (conversation,) = stored(hearth_home).list()
    assert sent.stderr.strip() == f"hearth: saved as conversation {conversation.id}"
    assert conversation.id not in sent.stdout


# -- 9. ids by their first characters; an empty list says so ------------------------------------------

@pytest.fixture
def many_conversations(hearth_home) -> list[str]:
    """17 conversations: at least two ids share their first character (there are 16)."""
    store = stored(hearth_home)
    ids = [store.create(f"Chat {n}").id for n in range(17)]
    for conversation_id in ids:
        store.add_message(conversation_id, "user", "Hello?", parent_id=None)
    return ids


def test_a_prefix_of_several_ids_or_of_none_is_refused_in_one_line_saying_what_to_do(many_conversations):
    first_characters = [c[0] for c in many_conversations]
    shared = next(c for c in first_characters if first_characters.count(c) > 1)
    for command in (("send", "--conversation", shared, "Hi"), ("chat", "--conversation", shared)):
        line = error_line(installed_hearth(*command))
        assert f"'{shared}' is the start of {first_characters.count(shared)} conversation ids" in line, line
        assert "give more of its characters" in line and "`hearth conversations`" in line, line
    line = error_line(installed_hearth("send", "--conversation", "zz", "Hi"))
    assert "no conversation id starts with 'zz'; `hearth conversations` lists them" in line, line


def test_conversations_says_there_are_none_yet_and_how_to_start_one():
    listed = installed_hearth("conversations")
    assert listed.returncode == 0 and listed.stdout == ""
    assert "No saved conversations yet" in listed.stderr and "`hearth chat`" in listed.stderr
    assert json.loads(installed_hearth("conversations", "--json").stdout) == [], "scripts read the same empty list"
    searched = installed_hearth("conversations", "--search", "dragons")
    assert searched.stdout == "" and "No saved conversation matches 'dragons'" in searched.stderr


# -- 1. hearth app -----------------------------------------------------------------------------------

def test_help_says_how_to_open_the_window():
    top = installed_hearth("--help").stdout
    assert "Run `hearth app` to open the window" in " ".join(top.split())
    assert "app                 open the Hearth window" in top
    assert installed_hearth("app", "--help").stdout.startswith("usage: hearth app [-h]")


@pytest.mark.process
def test_hearth_app_opens_the_window():
    opened = installed_hearth("app", QT_QPA_PLATFORM="offscreen", HEARTH_SELF_CHECK_QUESTION="Hello?",
                              HEARTH_SELF_CHECK_TIMEOUT_S="1")
    report = json.loads(opened.stdout.strip().splitlines()[-1])  # the window's self-check, cut short
    assert report["window_shown_ms"] > 0, opened.stderr
    assert "Traceback" not in opened.stderr


# -- 13. one line each, and right ------------------------------------------------------------------

def test_a_mistyped_flag_gets_the_commands_own_usage_and_the_nearest_flag():
    typo = installed_hearth("chat", "--modle", "x")
    assert typo.returncode == 2
    assert typo.stderr.startswith("usage: hearth chat "), typo.stderr
    assert typo.stderr.splitlines()[-1] == ("hearth chat: error: unrecognized arguments: --modle x; "
                                            "did you mean --model?")
    nested = installed_hearth("doc", "load", "--agian", "notes.txt")
    assert nested.stderr.splitlines()[-1].endswith("did you mean --again?")


def test_a_model_name_hearth_does_not_know_is_not_offered_for_download():
    line = error_line(installed_hearth("generate", "--model", "nosuch", "hi"))
    assert "models pull" not in line, line
    assert "'nosuch' is neither a model file nor an installed or catalogue model's id" in line
    assert "`hearth models list`" in line
    close = error_line(installed_hearth("generate", "--model", "qwen3.5-0.8", "hi"))
    assert "did you mean 'qwen3.5-0.8b'?" in close and "models pull" not in close, close
    catalogue = error_line(installed_hearth("generate", "--model", "qwen3.5-0.8b", "hi"))
    assert "`hearth models pull qwen3.5-0.8b` downloads it" in catalogue, "a catalogue id is offered, as before"


def test_a_port_in_use_says_to_stop_the_program_or_choose_another():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = error_line(installed_hearth("serve", "--port", str(port)))
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in line, line
    assert f"another program is using port {port}; stop it, or choose another --port" in line


def _without_privileged_ports() -> tuple[str, ...]:
    """A command prefix under which port 80 is refused with EACCES, as for any user but root."""
    if int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text()) <= 80:
        pytest.skip("this system lets every user open port 80")
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and setpriv is not here to drop the right to open low ports")
    return (setpriv, "--bounding-set=-net_bind_service")


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").exists(), reason="Linux only")
def test_a_port_below_1024_says_it_needs_privileges_not_that_a_program_uses_it():
    line = error_line(hearth("serve", "--port", "80", prefix=_without_privileged_ports()))
    assert "cannot listen on 127.0.0.1:80 (Permission denied)" in line, line
    assert "ports below 1024 need administrator rights; choose a --port of 1024 or more" in line
    assert "using it" not in line
    assert "another program" in what_to_do_when_unable_to_listen(errno.EADDRINUSE, 80), "in use is in use"


def test_a_missing_file_is_named_by_its_path_in_a_command_and_chosen_again_in_the_window(tmp_path):
    missing = tmp_path / "gone" / "notes.txt"
    line = error_line(installed_hearth("doc", "load", str(missing)))
    assert f"{missing} was not found" in line and "check the path" in line and "pass another file" in line, line
    assert "choose it again" not in line
    with pytest.raises(DocumentError) as refused:
        extract_text(missing)
    assert str(refused.value).startswith("notes.txt was not found") and "choose it again" in str(refused.value)
    folder = error_line(installed_hearth("doc", "load", str(tmp_path)))
    assert f"{tmp_path} is a folder, not a file; pass the path of a document inside it" in folder
