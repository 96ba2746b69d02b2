"""The app when its database file fails, and when a window and a command write in one conversation.

A damaged ``hearth.db`` is said in the banner with a Recover action that copies every readable row
into a new file; the app then works on it. A conversation has one writer at a time across the
window and ``hearth send`` (a lock in the database): the command waits for the window's answer,
and the window refuses at once, with the reason, while a command answers (it never blocks).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import msgspec
from PySide6.QtCore import Qt

from app.services.paths import user_paths
from engine.backends.faults import PACE_ENV
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore
from tests.helpers.cli import start_hearth
from tests.helpers.full_disk import full_disk  # noqa: F401 (a fixture)
from tests.helpers.gui import LONG_ANSWER
from tests.helpers.template_turns import held_text
from tests.store.damaged import make_damaged_database


def stored(fn):
    db = open_database(database_path(user_paths().data))
    try:
        return fn(ConversationStore(db))
    finally:
        db.close()


class Lines:
    """A process's stderr, line by line, read on a thread (the Qt loop keeps running meanwhile)."""

    def __init__(self, process) -> None:
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(process.stderr), daemon=True).start()

    def any(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))


def test_a_damaged_database_offers_recovery_and_the_app_works_on_the_result(start_app, tiny_settings):
    damaged = make_damaged_database(database_path(user_paths().data))
    before = damaged.path.read_bytes()
    app = start_app()
    banner = app.window.banner
    app.qtbot.waitUntil(lambda: "it is damaged" in banner.text(), timeout=30_000)
    assert banner.kind == "error" and str(damaged.path) in banner.text()
    assert banner.action.isVisible() and banner.action.text() == "Recover"
    app.wait_loaded()
    assert damaged.path.read_bytes() == before, "nothing was written to the damaged file"

    app.qtbot.mouseClick(banner.action, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: "Recovered 40 conversations" in banner.text(), timeout=60_000)
    aside = [p for p in damaged.path.parent.iterdir() if re.fullmatch(r"hearth\.db\.damaged-\d{8}-\d{6}", p.name)]
    assert len(aside) == 1 and aside[0].read_bytes() == before
    app.qtbot.waitUntil(lambda: app.controller.conversations.rowCount() == 40, timeout=30_000)
    assert stored(lambda s: {m for c in damaged.conversation_ids for m in _ids(s, c)}) <= damaged.readable_ids

    app.wait_loaded()
    turn = app.send_and_wait("Hello after the recovery.")
    assert turn.finished is not None and turn.answer.status == "done"
    assert stored(lambda s: s.message(turn.answer.id).content) == turn.text


def _ids(store, conversation_id):
    return {m.id for m in store.current_branch(conversation_id)}


def test_a_command_waits_while_the_window_answers_then_answers_after_it(start_app, hybrid_tiny, monkeypatch):
    from tests.helpers.gui import write_settings

    # The window's answer must still be written when the command starts, on a CPU of any speed.
    monkeypatch.setenv(PACE_ENV, "20")
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=12, draft="off")
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("Remember the lighthouse.")
    conversation = app.controller.conversation.id
    app.controller.settings = msgspec.structs.replace(app.controller.settings, max_tokens=LONG_ANSWER)
    app.type_and_send("Tell me a long story.")
    app.qtbot.waitUntil(lambda: len(app.transcript()) == 4 and len(app.transcript()[3][1]) > 20, timeout=60_000)

    command = start_hearth("send", "--conversation", conversation, "--max-tokens", "8", "--temperature", "0",
                           "From the command line.", HEARTH_WRITER_WAIT_S="300")
    stderr = Lines(command)
    app.qtbot.waitUntil(lambda: stderr.any("waiting for a Hearth window (process "), timeout=120_000)
    assert command.poll() is None and not stored(lambda s: any(
        m.content == "From the command line." for m in s.current_branch(conversation)))
    app.controller.stop()
    window_turn = app.wait_turn(2)
    assert window_turn.answer.status == "stopped" and window_turn.text
    command.wait(timeout=300)
    assert command.returncode == 0, stderr.lines

    branch = stored(lambda s: s.current_branch(conversation))
    assert [m.content for m in branch[:4]] == ["Remember the lighthouse.", branch[1].content, "Tell me a long story.",
                                               window_turn.text]
    assert branch[4].content == "From the command line." and branch[4].parent_id == window_turn.answer.id
    db = open_database(database_path(user_paths().data))
    snapshots = SnapshotStore(db)
    (record,) = snapshots.for_message(branch[5].id)
    assert window_turn.text in held_text(hybrid_tiny, snapshots, record), "the command's answer read the window's answer"
    db.close()


def test_the_window_refuses_at_once_while_a_command_answers_and_says_why(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("Remember the lighthouse.")
    conversation = app.controller.conversation.id
    command = start_hearth("send", "--conversation", conversation, "--max-tokens", str(LONG_ANSWER),
                           "--temperature", "0", "A long story, please.")
    try:
        app.qtbot.waitUntil(lambda: stored(lambda s: s.current_branch(conversation)[-1].status) == "generating",
                            timeout=120_000)  # the command is answering
        started = time.monotonic()
        app.type_and_send("From the window.")
        banner = app.window.banner
        app.qtbot.waitUntil(lambda: "is answering in this conversation" in banner.text(), timeout=10_000)
        assert time.monotonic() - started < 5, "the window does not wait for the other writer"
        assert banner.text().startswith(f"A `hearth send` command (process {command.pid}) is answering")
        assert "not sent" in banner.text() and banner.kind == "warning"
        assert app.window.composer.text() == "From the window.", "the message is given back"
        assert not app.controller.generating
        assert not stored(lambda s: any(m.content == "From the window." for m in s.current_branch(conversation)))
    finally:
        os.kill(command.pid, signal.SIGKILL)
        command.wait(timeout=60)

    app.qtbot.keyClick(app.window.composer.edit, Qt.Key.Key_Return)  # the command is gone: its lock is stale
    turn = app.wait_turn(2)
    assert turn.user.content == "From the window." and turn.answer.status == "done"
    statuses = [(m.content, m.status) for m in stored(lambda s: s.current_branch(conversation))[2:]]
    assert statuses == [("A long story, please.", "done"), ("", "interrupted"), ("From the window.", "done"),
                        (turn.text, "done")], "the killed command's empty answer is marked interrupted"


def test_on_a_full_disk_the_window_lists_and_says_the_disk_is_full(start_app, tiny_settings, full_disk):
    """Issue 32, point 9, in the window: the conversations are listed and read, and the notice says
    the disk is full and how much to free (before, it said the file was read-only)."""
    db = open_database(database_path(user_paths().data))
    store = ConversationStore(db)
    conversation = store.create("Lighthouses")
    store.add_message(conversation.id, "user", "Tell me about lighthouses.", parent_id=None)
    db.close()
    assert full_disk() == 0
    app = start_app()
    banner = app.window.banner
    app.qtbot.waitUntil(lambda: app.controller.conversations.rowCount() == 1, timeout=30_000)
    app.qtbot.waitUntil(lambda: "is full" in banner.text(), timeout=30_000)
    assert "free at least" in banner.text() and "read-only" not in banner.text(), banner.text()
