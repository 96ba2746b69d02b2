"""Two ``hearth send --conversation ID`` at the same moment: the conversation has one writer at a time.

The second send waits for the first to store its answer, so its message hangs under the *finished*
answer and the engine reads that answer before writing the next one. The check is on what the
engine read: each turn's end state is saved with the text it corresponds to (the snapshot), and
that text must hold every earlier answer of the branch. Without the lock, the second message was
stored under the first answer while it was still an empty placeholder, and the second answer was
computed on a transcript without the first.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore
from model_store.writer_lock import process_started, take_writer_lock
from tests.helpers.cli import error_line, hearth, start_hearth
from tests.helpers.template_turns import held_text

ROUNDS = 4
# Long enough that one answer is still being written when the other command has loaded its model.
ANSWER = ("--max-tokens", "200", "--temperature", "0", "--draft", "off")


@pytest.fixture
def first_turn(hearth_home, hybrid_tiny):
    """A conversation with one finished turn; returns its id."""
    started = hearth("send", "--new", "Two writers", "--model", str(hybrid_tiny), *ANSWER, "--json",
                     "Tell me about the sea.")
    assert started.returncode == 0, started.stderr
    return json.loads(started.stdout)["conversation_id"]


def test_two_sends_at_once_take_turns_and_each_reads_the_others_answer(hearth_home, hybrid_tiny, first_turn):
    conversation = first_turn
    for round_ in range(ROUNDS):
        sends = [start_hearth("send", "--conversation", conversation, *ANSWER, f"Round {round_}, writer {who}.")
                 for who in "AB"]
        for send in sends:
            _out, err = send.communicate(timeout=300)
            assert send.returncode == 0, err
            assert "Traceback" not in err

    db = open_database(database_path(hearth_home / "data"))
    store, snapshots = ConversationStore(db), SnapshotStore(db)
    branch = store.current_branch(conversation)
    assert len(branch) == 2 + 4 * ROUNDS, "every message is on the one branch"
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == len(branch), "no message off the branch"
    assert [m.role for m in branch] == ["user", "assistant"] * (1 + 2 * ROUNDS)
    assert all(m.status == "done" and m.content for m in branch if m.role == "assistant")
    for i, answer in enumerate(branch):
        if answer.role != "assistant":
            continue
        (record,) = snapshots.for_message(answer.id)
        read = held_text(hybrid_tiny, snapshots, record)
        for earlier in branch[:i]:
            assert earlier.content in read, f"answer {i} was written without seeing message: {earlier.content!r}"
    db.close()


def test_a_send_waits_for_another_writer_says_so_and_refuses_when_the_wait_runs_out(hearth_home, first_turn):
    conversation = first_turn
    db = open_database(database_path(hearth_home / "data"))
    lock = take_writer_lock(db, conversation, "a Hearth window")
    started = time.monotonic()
    refused = hearth("send", "--conversation", conversation, *ANSWER, "Anyone there?", HEARTH_WRITER_WAIT_S="2")
    assert time.monotonic() - started >= 2
    waiting, line = refused.stderr.splitlines()
    assert waiting.startswith("hearth: waiting for a Hearth window (process ") and "answering in this conversation" \
        in waiting
    refused_alone = subprocess.CompletedProcess(refused.args, refused.returncode, refused.stdout, line + "\n")
    assert "a Hearth window (process" in error_line(refused_alone) and "after waiting 2 s" in line
    assert len(ConversationStore(db).current_branch(conversation)) == 2, "nothing was stored"

    waiter = start_hearth("send", "--conversation", conversation, *ANSWER, "Now?")
    assert waiter.stderr.readline().startswith("hearth: waiting for a Hearth window")
    time.sleep(0.5)
    assert waiter.poll() is None, "it waits..."
    lock.release(db)  # ...until the writer is done
    _out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    assert [m.content for m in ConversationStore(db).current_branch(conversation)][2] == "Now?"
    db.close()


def test_a_lock_left_by_a_killed_command_is_taken_over(hearth_home, first_turn):
    conversation = first_turn
    db = open_database(database_path(hearth_home / "data"))
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(ended.stdout)
    assert process_started(pid) is None
    now = time.time()
    db.execute("INSERT INTO writer_locks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               [conversation, "0" * 32, "a `hearth send` command", pid, socket.gethostname(), now - 5, now, now])
    db.conn.commit()
    sent = hearth("send", "--conversation", conversation, *ANSWER, "Still here?", HEARTH_WRITER_WAIT_S="0")
    assert sent.returncode == 0, sent.stderr
    assert "waiting" not in sent.stderr
    assert db.execute("SELECT count(*) FROM writer_locks").fetchone()[0] == 0, "released at the end of the turn"
    db.close()


# -- a writer that is stopped (SIGSTOP, Ctrl+Z, a laptop asleep) -------------------------------------------------

PACED = {"HEARTH_TEST_DECODE_PACE_MS": "40"}  # slow enough (8 s for 200 tokens, heartbeats 5 s apart) to be caught while writing
ASLEEP_S = 3600  # how long ago the stopped writer's last heartbeat was made to look


def stop_between_heartbeats(db, conversation: str, writer: subprocess.Popen) -> None:
    """SIGSTOP ``writer`` and its worker just after a heartbeat of its lock was committed: it then holds
    no SQLite write lock while it is stopped (the next beat is HEARTBEAT_S away), as a writer stopped
    while it streams an answer. Both stop, as Ctrl+Z stops the terminal's whole job and sleep the whole
    laptop (the worker stores the answer, so a worker left running would finish the turn meanwhile). Without this, a stop inside a heartbeat's transaction would make every other
    writer wait for SQLite's lock (busy_timeout), which is not what is tested here."""
    _token, beat = writing(db, conversation, writer.pid)
    deadline = time.monotonic() + 60
    while db.execute("SELECT heartbeat_at FROM writer_locks WHERE conversation_id = ?", [conversation]).fetchone()[0] \
            == beat:
        assert time.monotonic() < deadline, "no heartbeat within a minute"
        time.sleep(0.01)
    for process in writer_processes(writer):
        process.send_signal(signal.SIGSTOP)  # as Ctrl+Z or a laptop's sleep would


def writer_processes(writer: subprocess.Popen) -> list[psutil.Process]:
    """The command and its worker."""
    command = psutil.Process(writer.pid)
    return [command, *command.children(recursive=True)]


def resume(writer: subprocess.Popen) -> None:
    for process in writer_processes(writer):
        process.send_signal(signal.SIGCONT)


def writing(db, conversation: str, pid: int, timeout: float = 300):
    """Wait until the command ``pid`` holds the conversation and has stored its empty answer; the lock row."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = db.execute("SELECT token, heartbeat_at FROM writer_locks WHERE conversation_id = ? AND pid = ?",
                         [conversation, pid]).fetchone()
        last = ConversationStore(db).current_branch(conversation)[-1]
        if row and last.role == "assistant" and last.status == "generating":
            return row
        time.sleep(0.05)
    raise AssertionError("the first command never started writing")


def test_a_stopped_writer_keeps_its_conversation_the_second_waits_for_it_and_nothing_interleaves(hearth_home,
                                                                                                  first_turn):
    conversation = first_turn
    db = open_database(database_path(hearth_home / "data"))
    first = start_hearth("send", "--conversation", conversation, *ANSWER, "--json", "A asks.", **PACED)
    try:
        stop_between_heartbeats(db, conversation, first)
        # Stopped for an hour, as far as the row can tell: far older than STALE_AFTER_S.
        db.execute("UPDATE writer_locks SET heartbeat_at = ? WHERE conversation_id = ?",
                   [time.time() - ASLEEP_S, conversation])
        db.conn.commit()
        before = [(m.id, m.content, m.status) for m in ConversationStore(db).current_branch(conversation)]

        second = hearth("send", "--conversation", conversation, *ANSWER, "B asks.", HEARTH_WRITER_WAIT_S="3")
        waiting, line = second.stderr.splitlines()
        assert waiting.startswith(f"hearth: waiting for a `hearth send` command (process {first.pid})"), waiting
        refused = subprocess.CompletedProcess(second.args, second.returncode, second.stdout, line + "\n")
        assert f"a `hearth send` command (process {first.pid}) is still answering" in error_line(refused)
        after = [(m.id, m.content, m.status) for m in ConversationStore(db).current_branch(conversation)]
        assert after == before, "the second writer stored nothing"
        assert "B asks." not in [m[0] for m in db.execute("SELECT content FROM messages")]
    finally:
        resume(first)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err

    branch = ConversationStore(db).current_branch(conversation)
    question, answer = branch[-2:]
    printed = json.loads(out)
    assert question.content == "A asks." and answer.parent_id == question.id
    assert (answer.id, answer.role, answer.status) == (printed["message_id"], "assistant", "done")
    assert answer.content == printed["text"] and len(printed["token_ids"]) > 20, "A's whole answer, under A's question"
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == len(branch) == 4, "no message off the branch"
    db.close()


@pytest.mark.parametrize("how", ["removed", "taken"])
def test_a_writer_that_lost_its_conversation_stores_nothing_and_says_so(hearth_home, first_turn, how):
    conversation = first_turn
    db = open_database(database_path(hearth_home / "data"))
    first = start_hearth("send", "--conversation", conversation, *ANSWER, "A asks.", **PACED)
    try:
        stop_between_heartbeats(db, conversation, first)
        if how == "removed":
            db.execute("DELETE FROM writer_locks WHERE conversation_id = ?", [conversation])
        else:  # another writer (here: a row as one on another computer would leave) holds it now
            db.execute("UPDATE writer_locks SET token = ?, who = 'a Hearth window', pid = 1, host = 'elsewhere' "
                       "WHERE conversation_id = ?", ["f" * 32, conversation])
        db.conn.commit()
    finally:
        resume(first)
    _out, err = first.communicate(timeout=300)
    line = error_line(subprocess.CompletedProcess(first.args, first.returncode, "", err))
    assert "so this answer was not saved" in line and "send the message again" in line, line
    if how == "taken":
        assert "a Hearth window (process 1 on elsewhere) took over" in line, line
    answer = ConversationStore(db).current_branch(conversation)[-1]
    assert answer.role == "assistant" and answer.status != "done" and answer.content == "", answer
    db.close()
