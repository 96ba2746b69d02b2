"""One writer per conversation across processes, and the tidy after a crash: interrupted answers
marked, empty conversations removed, dead writers' locks taken over, and live writers left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from model_store.after_crash import EMPTY_GRACE_S, open_conversation_store, tidy_after_crash
from model_store.db import database_path, open_database
from model_store.writer_lock import (
    STALE_AFTER_S, ConversationBusy, WriterLockLost, holder_of, holders, process_started, take_writer_lock,
)

WHO = "a test writer"


@pytest.fixture
def path(tmp_path):
    return database_path(tmp_path / "data")


def dead_pid() -> int:
    """The id of a process that has ended (and been waited for)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def fake_holder(db, conversation_id: str, *, pid: int, started: float | None = None, heartbeat_age: float = 0.0,
                host: str | None = None) -> None:
    import socket

    now = time.time()
    db.execute("INSERT OR REPLACE INTO writer_locks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               [conversation_id, "t" * 32, "a `hearth send` command", pid, host or socket.gethostname(),
                started if started is not None else (process_started(pid) or 0.0), now, now - heartbeat_age])
    db.conn.commit()


def test_a_second_writer_is_refused_with_who_holds_it_then_gets_in_after_release(path):
    one, two = open_database(path), open_database(path)
    conversation = open_conversation_store(path).create("c")
    lock = take_writer_lock(one, conversation.id, "a `hearth send` command")
    with pytest.raises(ConversationBusy) as busy:
        take_writer_lock(two, conversation.id, WHO)
    assert "a `hearth send` command (process" in str(busy.value) and conversation.id in str(busy.value)
    lock.release(one)
    take_writer_lock(two, conversation.id, WHO).release(two)
    assert holders(one) == []


def test_a_waiting_writer_says_so_after_a_moment_and_gets_in_when_the_first_is_done(path):
    one, two = open_database(path), open_database(path)
    conversation = open_conversation_store(path).create("c")
    lock = take_writer_lock(one, conversation.id, "a Hearth window")
    said = []
    threading.Timer(1.6, lambda: lock.release(open_database(path))).start()
    started = time.monotonic()
    second = take_writer_lock(two, conversation.id, WHO, wait_s=30, on_wait=lambda h: said.append(h.who))
    waited = time.monotonic() - started
    assert 1.5 < waited < 10 and said == ["a Hearth window"]
    second.release(two)


def test_a_wait_that_runs_out_is_refused(path):
    one, two = open_database(path), open_database(path)
    conversation = open_conversation_store(path).create("c")
    lock = take_writer_lock(one, conversation.id, WHO)
    started = time.monotonic()
    with pytest.raises(ConversationBusy, match="after waiting"):
        take_writer_lock(two, conversation.id, WHO, wait_s=1.2)
    assert 1.1 < time.monotonic() - started < 5
    lock.release(one)


@pytest.mark.parametrize("how", ["dead pid", "reused pid", "old heartbeat"])
def test_a_stale_lock_is_taken_over(path, how):
    db = open_database(path)
    conversation = open_conversation_store(path).create("c")
    if how == "dead pid":
        fake_holder(db, conversation.id, pid=dead_pid())
    elif how == "reused pid":  # a live process, but not the one that took the lock
        fake_holder(db, conversation.id, pid=1, started=(process_started(1) or 0.0) + 1000)
    else:  # on another computer sharing the folder, silent for longer than STALE_AFTER_S
        fake_holder(db, conversation.id, pid=1, host="elsewhere", heartbeat_age=3600)
    lock = take_writer_lock(db, conversation.id, WHO)
    assert holder_of(db, conversation.id).who == WHO
    lock.release(db)


def test_a_live_holder_on_this_host_is_never_taken_over_however_old_its_heartbeat(path):
    """A stopped process (SIGSTOP, Ctrl+Z, a laptop asleep) writes no heartbeat, but resumes writing."""
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stopped.send_signal(signal.SIGSTOP)
        store = open_conversation_store(path)
        conversation = store.create("c")
        user = store.add_message(conversation.id, "user", "q", parent_id=None)
        answer = store.add_message(conversation.id, "assistant", "half", parent_id=user.id, status="generating")
        fake_holder(store.db, conversation.id, pid=stopped.pid, heartbeat_age=STALE_AFTER_S * 1000)
        with pytest.raises(ConversationBusy, match=f"process {stopped.pid}\\)"):
            take_writer_lock(store.db, conversation.id, WHO)
        assert tidy_after_crash(store).locks == 0
        assert store.message(answer.id).status == "generating", "its answer is still being written"
    finally:
        stopped.kill()
        stopped.wait()


def test_a_writer_confirms_it_still_holds_the_conversation(path):
    db = open_database(path)
    conversation = open_conversation_store(path).create("c")
    lock = take_writer_lock(db, conversation.id, WHO)
    lock.confirm(db)
    fake_holder(db, conversation.id, pid=1, host="elsewhere")  # its row was taken
    with pytest.raises(WriterLockLost, match="took over conversation .* so this answer was not saved"):
        lock.confirm(db)
    db.execute("DELETE FROM writer_locks")
    db.conn.commit()
    with pytest.raises(WriterLockLost, match="was removed"):
        lock.confirm(db)


def test_a_live_holder_on_another_host_is_respected(path):
    db = open_database(path)
    conversation = open_conversation_store(path).create("c")
    fake_holder(db, conversation.id, pid=1, host="elsewhere", heartbeat_age=5)
    with pytest.raises(ConversationBusy, match="on elsewhere"):
        take_writer_lock(db, conversation.id, WHO)


def test_the_heartbeat_keeps_a_lock_fresh(path, monkeypatch):
    import model_store.writer_lock as writer_lock

    monkeypatch.setattr(writer_lock, "HEARTBEAT_S", 0.2)
    db = open_database(path)
    conversation = open_conversation_store(path).create("c")
    lock = take_writer_lock(db, conversation.id, WHO)
    first = holder_of(db, conversation.id).heartbeat_at
    time.sleep(1.0)
    assert holder_of(db, conversation.id).heartbeat_at > first
    lock.release(db)


def test_tidy_marks_dead_writers_answers_interrupted_keeping_their_text_and_leaves_live_ones(path):
    store = open_conversation_store(path)
    dead, live = store.create("dead"), store.create("live")
    answers = {}
    for conversation, text in ((dead, "half an ans"), (live, "")):
        user = store.add_message(conversation.id, "user", "q", parent_id=None)
        answers[conversation.id] = store.add_message(conversation.id, "assistant", text, parent_id=user.id,
                                                     status="generating")
    fake_holder(store.db, dead.id, pid=dead_pid())
    lock = take_writer_lock(store.db, live.id, WHO)

    tidied = tidy_after_crash(store)
    assert (tidied.interrupted, tidied.locks) == (1, 1)
    stopped = store.message(answers[dead.id].id)
    assert (stopped.status, stopped.content) == ("interrupted", "half an ans")
    assert store.message(answers[live.id].id).status == "generating"  # still being written
    assert [h.conversation_id for h in holders(store.db)] == [live.id]
    lock.release(store.db)


def test_tidy_removes_conversations_whose_first_message_was_never_stored(path):
    store = open_conversation_store(path)
    abandoned = store.create("its writer died before the first message")
    fake_holder(store.db, abandoned.id, pid=dead_pid())
    old = store.create("empty for long")
    young = store.create("empty, just created")  # another program may be about to add its first message
    kept = store.create("had messages")
    store.add_message(kept.id, "user", "hi", parent_id=None)
    store.db.execute("DELETE FROM messages")  # lost later (a damaged page): it keeps its title
    store.db.conn.commit()
    store.db.execute("UPDATE conversations SET created_at = created_at - ?, updated_at = updated_at - ? WHERE id = ?",
                     [EMPTY_GRACE_S * 2, EMPTY_GRACE_S * 2, old.id])
    store.db.conn.commit()

    assert tidy_after_crash(store).emptied == 2
    assert {c.title for c in store.list()} == {"empty, just created", "had messages"}
    assert young.id in {c.id for c in store.list()}
