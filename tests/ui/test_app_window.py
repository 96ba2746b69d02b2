"""The window around the chat: first run, telemetry, models, settings, the conversation list, keys."""

from __future__ import annotations

import socket

import msgspec
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QDoubleSpinBox

from app.services.paths import user_paths
from app.services.settings import load_settings
from tests.helpers.gui import write_settings


def test_first_run_opens_a_chat_on_the_embedded_default_model(start_app, monkeypatch):
    attempts = block_network(monkeypatch)
    app = start_app()  # no settings file, no conversations, no network
    app.wait_loaded()
    assert attempts == [], "the first run needs no network"
    assert app.controller.model_ref == "default" and app.controller.loaded.facts.arch == "llama"
    assert app.window.model_picker.combo.currentData() == "default"
    assert app.window.chat_view.welcome.isVisible() and app.window.banner.text() == ""
    assert QApplication.focusWidget() is app.window.composer.edit


def block_network(monkeypatch) -> list:
    """Refuse connections beyond this machine in this process (and say so to the worker's hub
    client); returns the addresses that were tried."""
    attempts: list = []
    connect = socket.socket.connect

    def guarded(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            attempts.append(address)
            raise OSError(f"no network in this test ({address[0]})")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return attempts


def test_telemetry_panel_updates_while_an_answer_is_written(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=3000, draft="off")
    app = start_app()
    app.wait_loaded()
    panel = app.window.telemetry_panel
    assert panel.values()["model_size"] != "—"
    app.type_and_send("Keep talking.")
    app.qtbot.waitUntil(lambda: panel.values()["decode_rate"].endswith("tok/s"), timeout=60_000)
    during = panel.values()
    assert during["prefill_device"].startswith("cpu") and during["decode_device"].startswith("cpu")
    assert during["state_kv"] not in ("—", "0 B") and during["memory"] != "—"
    samples = len(panel.decode_sparkline.values())
    app.qtbot.waitUntil(lambda: len(panel.decode_sparkline.values()) > samples, timeout=10_000)
    assert max(panel.decode_sparkline.values()) > 0
    app.controller.stop()
    app.wait_turn()


def test_a_broken_model_file_is_explained_and_the_default_can_still_be_chosen(start_app, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    write_settings(model=str(broken))
    app = start_app()
    app.qtbot.waitUntil(lambda: "broken.gguf" in app.window.banner.text(), timeout=60_000)
    assert app.window.banner.kind == "error" and app.controller.loaded is None
    assert not app.controller.send("hello"), "nothing is sent without a model"

    picker = app.window.model_picker.combo
    picker.setCurrentIndex(picker.findData("default"))
    picker.activated.emit(picker.currentIndex())
    app.wait_loaded()
    assert app.controller.loaded.facts.arch == "llama"
    assert load_settings(user_paths().config).settings.model == "default", "the choice is remembered"


def test_settings_dialog_opens_with_ctrl_comma_and_saves_what_is_accepted(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.qtbot.keyClick(app.window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = app.window.settings_dialog
    app.qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    dialog.findChild(QDoubleSpinBox, "temperature").setValue(0.3)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    app.qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5_000)
    saved = load_settings(user_paths().config).settings
    assert saved.temperature == 0.3 and app.controller.settings.temperature == 0.3
    assert saved == msgspec.structs.replace(tiny_settings, temperature=0.3)
    assert app.controller.loaded is not None, "sampling applies to the next answer; the model is not reloaded"


def test_a_new_device_policy_reloads_the_model_and_the_next_answer_reads_there(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=4, draft="off", device_policy="cpu")
    app = start_app()
    app.wait_loaded()
    before = app.controller.loaded
    assert before.devices.prefill.device == "cpu"
    app.window.open_settings()
    dialog = app.window.settings_dialog
    dialog.device_policy.setCurrentIndex(dialog.device_policy.findData("npu"))
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()

    app.qtbot.waitUntil(lambda: app.controller.loaded not in (None, before), timeout=120_000)
    assert app.controller.loaded.devices.prefill.device == "npu-emulator"
    assert app.window.telemetry_panel._reasons["prefill"].text() == "NPU emulator (forced; emulated, slow)"
    turn = app.send_and_wait("Tell me about the river and the old mill by the bridge.")
    assert turn.finished.devices.prefill.device == "npu-emulator"
    assert load_settings(user_paths().config, npu_available=True).settings.device_policy == "npu"


def test_ctrl_f_finds_conversations_by_title_and_by_message_content(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    bicycle = "Fix my bicycle\nThe chain squeaks when I pedal."  # the title is the first line only
    app.send_and_wait(bicycle)
    app.qtbot.keyClick(app.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    app.send_and_wait("Plan a picnic")
    app.qtbot.keyClick(app.window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    search = app.window.conversation_panel.search
    assert QApplication.focusWidget() is search
    model = app.controller.conversations

    app.qtbot.keyClicks(search, "squeaks")  # only in a message, in no title
    app.qtbot.waitUntil(lambda: model.rowCount() == 1 and model.conversation(0).title == "Fix my bicycle",
                        timeout=10_000)
    app.qtbot.keyClick(search, Qt.Key.Key_Return)  # opens the first match
    app.qtbot.waitUntil(lambda: app.transcript()[:1] == [("user", bicycle, "done")], timeout=10_000)

    app.qtbot.keyClick(app.window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)  # selects the old query
    app.qtbot.keyClicks(search, "picnic")  # in a title
    app.qtbot.waitUntil(lambda: model.rowCount() == 1 and model.conversation(0).title == "Plan a picnic",
                        timeout=10_000)


def _focus_in_list(app, conversation_id: str):
    view = app.window.conversation_panel.list
    view.setFocus()
    view.setCurrentIndex(app.controller.conversations.index(app.controller.conversations.row_of(conversation_id)))
    return view


def test_del_deletes_with_an_undo_that_later_notices_do_not_take_away(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("Keep me")
    kept = app.controller.conversation.id
    app.qtbot.keyClick(app.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    app.send_and_wait("Delete me")
    doomed = app.controller.conversation.id
    model, banner = app.controller.conversations, app.window.banner
    app.qtbot.waitUntil(lambda: set(model.ids()) == {kept, doomed}, timeout=10_000)

    app.qtbot.keyClick(_focus_in_list(app, doomed), Qt.Key.Key_Delete)
    assert model.ids() == [kept] and banner.text() == "Deleted “Delete me”."
    app.controller.notice.emit("info", "The engine restarted and is ready.")  # news before the user undoes
    assert banner.text() == "The engine restarted and is ready.\nDeleted “Delete me”."
    app.qtbot.keyClick(_focus_in_list(app, kept), Qt.Key.Key_Delete)  # a second delete shares the Undo
    assert model.ids() == [] and banner.text() == "Deleted “Delete me” and “Keep me”."
    app.qtbot.mouseClick(banner.action, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: set(model.ids()) == {kept, doomed}, timeout=10_000)

    app.window.undo_delete_timer.setInterval(200)
    app.qtbot.keyClick(_focus_in_list(app, doomed), Qt.Key.Key_Delete)
    app.qtbot.waitUntil(lambda: banner.text() == "", timeout=5_000)  # the undo time ran out: no Undo is left
    app.wait_idle_store()
    remaining: list = []
    app.controller.store.submit(lambda store: [c.title for c in store.list()], remaining.append)
    app.qtbot.waitUntil(lambda: remaining == [["Keep me"]], timeout=10_000)


def test_rename_in_place_with_f2(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("Old title")
    app.wait_idle_store()
    view = app.window.conversation_panel.list
    view.setFocus()
    view.setCurrentIndex(app.controller.conversations.index(0))
    app.qtbot.keyClick(view, Qt.Key.Key_F2)
    editor = QApplication.focusWidget()
    editor.selectAll()
    app.qtbot.keyClicks(editor, "New title")
    app.qtbot.keyClick(editor, Qt.Key.Key_Return)
    app.wait_idle_store()
    app.qtbot.waitUntil(lambda: app.controller.conversations.conversation(0).title == "New title", timeout=10_000)
    result: list = []
    app.controller.store.submit(lambda s: s.get(app.controller.conversation.id).title, result.append)
    app.qtbot.waitUntil(lambda: result == ["New title"], timeout=10_000)


def test_a_damaged_database_is_reported_and_left_untouched(start_app, tiny_settings):
    from model_store.db import database_path

    db = database_path(user_paths().data)
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    app = start_app()
    app.qtbot.waitUntil(lambda: "Could not open the conversation database" in app.window.banner.text(),
                        timeout=30_000)
    assert app.window.banner.kind == "error"
    app.wait_loaded()
    app.type_and_send("hello")
    app.qtbot.waitUntil(lambda: "Could not save your message" in app.window.banner.text(), timeout=30_000)
    assert not app.controller.generating
    assert db.read_bytes() == b"this is not a database" * 100, "the user's file is never overwritten"


def test_mtp_setting_on_a_model_without_a_head_falls_back_with_a_note(start_app, hybrid_tiny, test_models):
    write_settings(model=str(test_models["hybrid-draft"]), temperature=0.0, max_tokens=8, draft="mtp")
    app = start_app()
    app.wait_loaded()
    turn = app.send_and_wait("Hello there")
    assert turn.finished.finish_reason in ("stop", "length") and not turn.errors
    assert turn.finished.draft.kind != "mtp"
    assert "no MTP head" in app.window.banner.text()

    app.controller.load_model(str(hybrid_tiny))  # this one has a head: MTP is used as asked
    app.wait_loaded()
    with_head = app.send_and_wait("And now?")
    assert with_head.finished.draft.kind == "mtp" and not with_head.errors


def test_settings_offer_the_npu_emulator_labelled_slow(start_app, tiny_settings, qtbot):
    app = start_app()
    app.wait_loaded()
    assert app.controller.npu_kind() == "npu-emulator"  # this machine: the QNN HTP emulator
    app.window.open_settings()
    combo = app.window.settings_dialog.device_policy
    assert combo.itemText(combo.findData("npu")) == "NPU (emulator only: slow)"


def test_telemetry_shows_the_emulator_read_the_input_and_why(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=4, draft="off", device_policy="npu")
    app = start_app()
    app.wait_loaded()
    panel = app.window.telemetry_panel
    assert panel._reasons["prefill"].text() == "NPU emulator (forced; emulated, slow)"  # the plan at load
    turn = app.send_and_wait("Tell me about the river and the old mill by the bridge.")
    assert turn.finished.devices.prefill.device == "npu-emulator"
    assert panel.values()["prefill_device"].startswith("npu-emulator")
    assert "emulated, slow" in panel._reasons["prefill"].text()
    assert panel.values()["decode_device"].startswith("cpu")
