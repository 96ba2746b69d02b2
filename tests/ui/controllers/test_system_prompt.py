"""A conversation's system prompt in the window, on the scripted engine: a new conversation starts with
the default from Settings, and "System prompt…" on a conversation in the list changes its own, sent
from the next message."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from engine import protocol as p
from tests.fakes.engine_client import answer
from tests.helpers.gui import stored, write_settings
from model_store.conversations import Conversation
from ui.item_models.conversation_list import ID_ROLE, ConversationListModel
from ui.system_prompt_editor import CHANGED

DEFAULT = "Be brief."
PIRATE = "Answer like a pirate."


def system_of(command: p.AnswerTurn) -> str | None:
    first = command.messages[0]
    return first.content if first.role == "system" else None


def open_editor(app, conversation_id: str):
    """Choose "System prompt…" in the conversation's menu in the list; the dialog it opens."""
    panel = app.window.conversation_panel
    index = next(panel.model.index(row) for row in range(panel.model.rowCount())
                 if panel.model.index(row).data(ID_ROLE) == conversation_id)
    menu = panel.menu_for(index)
    action = next(a for a in menu.actions() if a.text() == "System prompt…")
    action.trigger()
    editor = app.window.system_prompt_editor
    app.wait(lambda: editor.dialog is not None and editor.dialog.isVisible())
    return editor.dialog


def test_a_new_conversation_starts_with_the_default_system_prompt(start_scripted, engine):
    write_settings(system_prompt=DEFAULT)
    engine.script(p.AnswerTurn, answer("Hi."))
    app = start_scripted()
    turn = app.send_and_wait("Hello")
    assert system_of(engine.sent(p.AnswerTurn)[0]) == DEFAULT
    assert stored(app, lambda s: s.get(turn.conversation_id)).system_prompt == DEFAULT


def test_system_prompt_in_the_list_changes_the_conversations_own_from_the_next_message(start_scripted, engine):
    write_settings(system_prompt=DEFAULT)
    engine.script(p.AnswerTurn, answer("Hi."))
    app = start_scripted()
    first = app.send_and_wait("Hello")
    statuses: list[str] = []
    app.controller.status.connect(statuses.append)

    dialog = open_editor(app, first.conversation_id)
    assert dialog.edit.toPlainText() == DEFAULT
    dialog.edit.setPlainText(PIRATE)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    app.wait(lambda: app.controller.conversation.system_prompt == PIRATE)
    assert statuses[-1] == CHANGED

    engine.script(p.AnswerTurn, answer("Arr."))
    app.send_and_wait("Who are you?")
    commands = engine.sent(p.AnswerTurn)
    assert [system_of(c) for c in commands] == [DEFAULT, PIRATE]
    assert [(m.role, m.content) for m in commands[1].messages[1:]] == [("user", "Hello"), ("assistant", "Hi."),
                                                                       ("user", "Who are you?")]
    assert stored(app, lambda s: s.get(first.conversation_id)).system_prompt == PIRATE

    dialog = open_editor(app, first.conversation_id)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.RestoreDefaults).click()
    assert dialog.edit.toPlainText() == DEFAULT, "Use default: the one from Settings"
    dialog.reject()
    app.wait_idle_store()
    assert stored(app, lambda s: s.get(first.conversation_id)).system_prompt == PIRATE, "Cancel keeps it"


def test_renaming_in_the_list_keeps_the_rows_system_prompt(qtbot):
    listed = ConversationListModel()
    listed.set_conversations([Conversation("c1", "Old", "default", {}, 1.0, 2.0, None, system_prompt=PIRATE)])
    assert listed.setData(listed.index(0), "New", Qt.ItemDataRole.EditRole)
    assert listed.conversation(0) == Conversation("c1", "New", "default", {}, 1.0, 2.0, None, system_prompt=PIRATE)
