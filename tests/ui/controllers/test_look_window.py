"""The window as a chat app people know (issue 31, point 14), on the scripted engine: the composer
is one box with its buttons inside, an empty chat offers example prompts that fill it, and the
conversation list is grouped by date while search still narrows it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from engine import protocol as p
from tests.fakes.engine_client import answer
from ui.item_models.conversation_list import GROUP_ROLE, STARTS_GROUP_ROLE
from ui.theme import column_width
from ui.views.example_prompts import EXAMPLES


def test_the_composer_is_one_box_with_attach_and_send_inside_it(start_scripted):
    app = start_scripted()
    composer = app.window.composer
    for widget in (composer.edit, composer.attach_button, composer.send_button):
        assert composer.frame.isAncestorOf(widget), f"{widget.objectName()} is inside the box"
        assert composer.frame.rect().contains(widget.geometry()), f"{widget.objectName()} is drawn inside it"
    assert composer.send_button.geometry().left() > composer.attach_button.geometry().right(), "Send on the right"
    assert composer.edit.geometry().bottom() < composer.send_button.geometry().top(), "the buttons under the text"
    assert [b.text() for b in composer.findChildren(QPushButton)] == ["Attach…", "Send"], "Regenerate is the answer's"
    assert composer.frame.width() == min(column_width(), composer.width()), "as wide as the conversation's column"
    assert app.window.regenerate_action.shortcut().toString() == "Ctrl+R", "and the menu's, as before"


def test_an_example_prompt_fills_the_composer_and_sends_nothing(start_scripted, engine):
    app = start_scripted()
    examples = app.window.chat_view.examples
    assert examples.isVisible() and len(examples.cards) == len(EXAMPLES)
    app.qtbot.mouseClick(examples.cards[1], Qt.MouseButton.LeftButton)
    assert app.window.composer.text() == EXAMPLES[1][1]
    assert app.window.composer.edit.hasFocus(), "ready to send with Enter, or to change"
    assert engine.sent(p.ANSWERS) == [] and app.controller.conversation is None

    engine.script(p.AnswerTurn, answer("Light bends in raindrops."))
    app.qtbot.keyClick(app.window.composer.edit, Qt.Key.Key_Return)
    app.wait_turn()
    assert not examples.isVisible(), "a conversation shows its messages instead"


def test_conversations_are_listed_under_date_headings_and_search_still_narrows_them(start_scripted, engine):
    app = start_scripted()
    engine.script(p.AnswerTurn, answer("One."), answer("Two."))
    app.send_and_wait("First question")
    app.window.new_chat()
    app.send_and_wait("Second question")
    listed = app.window.conversation_panel.list.model()
    app.wait(lambda: listed.rowCount() == 2)
    assert [listed.index(row).data(GROUP_ROLE) for row in range(2)] == ["Today", "Today"]
    assert [listed.index(row).data(STARTS_GROUP_ROLE) for row in range(2)] == [True, False]

    app.qtbot.keyClicks(app.window.conversation_panel.search, "First")
    app.wait(lambda: listed.rowCount() == 1)
    assert listed.index(0).data() == "First question" and listed.index(0).data(STARTS_GROUP_ROLE)
