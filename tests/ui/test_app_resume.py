"""Conversations across switches, app restarts and worker crashes, resumed from their snapshots."""

from __future__ import annotations

import msgspec
from PySide6.QtCore import Qt

from tests.helpers.gui import LONG_ANSWER, watch_notices, write_settings


def _open_in_list(app, title: str) -> None:
    model = app.controller.conversations
    app.qtbot.waitUntil(lambda: any(model.conversation(i).title == title for i in range(model.rowCount())),
                        timeout=10_000)
    row = next(i for i in range(model.rowCount()) if model.conversation(i).title == title)
    view = app.window.conversation_panel.list
    rect = view.visualRect(model.index(row))
    app.qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_switching_conversations_shows_each_and_resumes_it_from_its_snapshot(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    first = app.send_and_wait("About rivers")
    app.qtbot.keyClick(app.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert app.transcript() == [] and app.controller.conversation is None
    second = app.send_and_wait("About mountains")
    assert first.conversation_id != second.conversation_id

    _open_in_list(app, "About rivers")
    app.qtbot.waitUntil(lambda: app.transcript() and app.transcript()[0][1] == "About rivers", timeout=10_000)
    assert [m[1] for m in app.transcript()] == ["About rivers", first.text]
    app.qtbot.waitUntil(lambda: "Resumed from snapshot" in app.window.status_line.text(), timeout=30_000)
    tokens = first.finished.timings.prompt_n + first.finished.timings.gen_n
    assert f"{tokens:,} tokens not re-read" in app.window.status_line.text()


def test_quit_and_start_again_shows_history_and_continues_from_the_snapshot(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    first = app.send_and_wait("Remember the word lighthouse.")
    app.window.close()
    assert app.controller.bridge.client.process is None, "closing the window stops the worker"

    again = start_app()
    again.wait_loaded()
    _open_in_list(again, "Remember the word lighthouse.")
    again.qtbot.waitUntil(lambda: len(again.transcript()) == 2, timeout=10_000)
    assert again.transcript() == [("user", "Remember the word lighthouse.", "done"),
                                  ("assistant", first.text, "done")]
    again.qtbot.waitUntil(lambda: "Resumed from snapshot" in again.window.status_line.text(), timeout=30_000)
    follow_up = again.send_and_wait("Which word?")

    report = follow_up.finished.snapshot
    earlier = first.finished.timings.prompt_n + first.finished.timings.gen_n
    assert report.restored and report.restored_tokens == earlier
    assert report.prefilled_tokens == follow_up.finished.timings.prompt_n < earlier, "only the new message is read"


def test_a_restart_with_an_empty_conversation_open_says_ready_once_and_never_again_later(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("About rivers")
    created: list[str] = []  # a conversation whose first message was never saved (a crash in between)
    app.controller.store.submit(lambda store: store.create("Nothing yet", model="default").id, created.append)
    app.qtbot.waitUntil(lambda: len(created) == 1, timeout=10_000)
    app.controller.refresh_list()
    _open_in_list(app, "Nothing yet")
    app.qtbot.waitUntil(lambda: getattr(app.controller.conversation, "id", None) == created[0], timeout=10_000)
    notices = watch_notices(app)
    app.kill_worker()
    app.qtbot.waitUntil(lambda: app.window.banner.text() == "The engine restarted and is ready.", timeout=60_000)

    _open_in_list(app, "About rivers")
    app.qtbot.waitUntil(lambda: "Resumed from snapshot" in app.window.status_line.text(), timeout=30_000)
    assert [n for _, n in notices if "restarted" in n] == ["The engine restarted and is ready."], \
        "no stale restart notice when a later conversation is opened"


def test_killing_the_worker_mid_answer_keeps_the_conversation_and_the_next_answer_resumes_its_snapshot(
        start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=12, draft="off")
    app = start_app()
    app.wait_loaded()
    first = app.send_and_wait("Remember the word lighthouse.")  # its end is snapshotted
    first_pid = app.controller.bridge.client.pid
    app.controller.settings = msgspec.structs.replace(app.controller.settings, max_tokens=LONG_ANSWER)
    app.type_and_send("Tell me a long story.")
    app.qtbot.waitUntil(lambda: len(app.transcript()) == 4 and len(app.transcript()[3][1]) > 20, timeout=60_000)
    watched = watch_notices(app)
    app.kill_worker()

    interrupted = app.wait_turn(2)
    assert interrupted.dead is not None and "SIGKILL" in interrupted.dead.message
    app.qtbot.waitUntil(lambda: "The engine restarted" in app.window.banner.text(), timeout=60_000)
    assert app.controller.bridge.client.pid != first_pid
    earlier = first.finished.timings.prompt_n + first.finished.timings.gen_n
    notices = [text for _, text in watched]
    assert len(notices) == 2, "one banner for the death, one for the restart; not one per event"
    assert "killed" in notices[0] and "Restarting" in notices[0]
    assert notices[1] == f"The engine restarted. Resumed from snapshot, {earlier:,} tokens not re-read."
    assert app.transcript() == [("user", "Remember the word lighthouse.", "done"), ("assistant", first.text, "done"),
                                ("user", "Tell me a long story.", "done"),
                                ("assistant", interrupted.text, "interrupted")]
    assert len(interrupted.text) > 20
    app.qtbot.waitUntil(lambda: app.window.chat_view.complete, timeout=10_000)
    said = app.window.chat_view.widgets[3].state.text()
    assert said == f"interrupted: {interrupted.dead.message}" and "killed" in said, "a crash says what ended the answer"

    app.controller.settings = msgspec.structs.replace(app.controller.settings, max_tokens=12)
    after = app.send_and_wait("And then?")
    assert after.finished.finish_reason in ("stop", "length") and after.dead is None
    report = after.finished.snapshot
    assert report.restored and report.restored_tokens == earlier, "the first turn is not read again"
    assert report.prefilled_tokens == after.finished.timings.prompt_n > 0, \
        "only what followed the snapshot is read: the interrupted turn and the new message"
    assert [m[0] for m in app.transcript()] == ["user", "assistant"] * 3
    assert app.transcript()[3] == ("assistant", interrupted.text, "interrupted")
