"""The window looks like a chat app people know (issue 31, point 14): conversations under date
headings, message actions on hover (and by keyboard), and no colour named outside the theme."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QEnterEvent, QFontMetrics
from PySide6.QtWidgets import QApplication, QStyleOptionViewItem, QVBoxLayout, QWidget

from app.services.chat_rows import MessageRow
from model_store.conversations import Conversation, Message
from ui.item_models.conversation_list import GROUP_ROLE, STARTS_GROUP_ROLE, ConversationListModel
from ui.item_models.date_groups import date_group
from ui.views.conversation_delegate import ConversationDelegate
from ui.views.message_widget import MessageWidget

NOW = datetime(2025, 6, 15, 10, 30)
UI = Path(__file__).resolve().parents[2] / "ui"


def test_date_groups_by_last_activity():
    assert date_group(NOW.replace(hour=0, minute=1), NOW) == "Today"
    assert date_group(NOW + timedelta(minutes=5), NOW) == "Today", "a clock a little ahead is still today"
    assert date_group(datetime(2025, 6, 14, 23, 59), NOW) == "Yesterday"
    assert date_group(datetime(2025, 6, 13, 8, 0), NOW) == "Previous 7 days"
    assert date_group(datetime(2025, 6, 8, 8, 0), NOW) == "Previous 7 days"
    assert date_group(datetime(2025, 6, 7, 8, 0), NOW) == "Previous 30 days"
    assert date_group(datetime(2025, 5, 16, 8, 0), NOW) == "Previous 30 days"
    assert date_group(datetime(2025, 5, 15, 8, 0), NOW) == datetime(2025, 5, 1).strftime("%B")
    assert date_group(datetime(2024, 12, 1), NOW) == datetime(2024, 12, 1).strftime("%B") + " 2024"


def _conversation(number: int, days_ago: float) -> Conversation:
    when = (datetime.now() - timedelta(days=days_ago)).timestamp()
    return Conversation(f"c{number}", f"Chat {number}", "model", {}, when, when, None)


def test_the_list_marks_the_first_row_of_each_group_and_draws_its_heading_above_it(qtbot):
    model = ConversationListModel()
    model.set_conversations([_conversation(1, 0), _conversation(2, 0), _conversation(3, 1), _conversation(4, 3)])
    groups = [model.index(row).data(GROUP_ROLE) for row in range(4)]
    starts = [model.index(row).data(STARTS_GROUP_ROLE) for row in range(4)]
    assert groups == ["Today", "Today", "Yesterday", "Previous 7 days"]
    assert starts == [True, False, True, True]
    assert model.rowCount() == 4 and model.index(2).data() == "Chat 3", "headings are not rows"

    delegate, option = ConversationDelegate(), QStyleOptionViewItem()
    option.fontMetrics = QFontMetrics(QApplication.font())
    heights = [delegate.sizeHint(option, model.index(row)).height() for row in range(4)]
    assert heights[1] < heights[0] and heights[1] < heights[2], "a heading's room above a group's first row"

    model.put_first(_conversation(4, 0))  # a turn in the oldest: now it is today's first
    assert [model.index(row).data(STARTS_GROUP_ROLE) for row in range(4)] == [True, False, False, True]


def _message_widget(qtbot, role: str = "assistant") -> tuple[QWidget, MessageWidget]:
    message = Message("m1", "c1", None, role, "An answer.", "done", 0.0, {})
    holder = QWidget()
    layout = QVBoxLayout(holder)
    widget = MessageWidget(MessageRow(message, ["m1"]))
    layout.addWidget(widget)
    qtbot.addWidget(holder)
    holder.show()
    qtbot.waitExposed(holder)
    return holder, widget


def test_message_actions_show_on_hover_only(qtbot):
    _holder, widget = _message_widget(qtbot)
    assert not widget.actions.revealed, "a transcript reads as text"
    assert not widget.copy.isHidden() and not widget.regenerate.isHidden(), "kept in place, see-through"
    centre = QPointF(widget.rect().center())
    QApplication.sendEvent(widget, QEnterEvent(centre, centre, widget.mapToGlobal(centre)))
    assert widget.actions.revealed
    QApplication.sendEvent(widget, _leave())
    assert not widget.actions.revealed


def _leave():
    from PySide6.QtCore import QEvent

    return QEvent(QEvent.Type.Leave)


def test_message_actions_are_reached_by_keyboard_and_show_while_focused(qtbot):
    holder, widget = _message_widget(qtbot)
    holder.activateWindow()
    qtbot.waitUntil(holder.isActiveWindow, timeout=2_000)
    widget.body.setFocus()
    qtbot.waitUntil(widget.body.hasFocus, timeout=2_000)
    assert widget.actions.revealed, "the focus on the message's text shows its actions"
    qtbot.keyClick(widget.body, Qt.Key.Key_Tab)
    assert widget.copy.hasFocus() and widget.actions.revealed
    qtbot.keyClick(widget.copy, Qt.Key.Key_Tab)
    assert widget.regenerate.hasFocus() and widget.actions.revealed
    widget.regenerate.clearFocus()
    assert not widget.actions.revealed


COLOUR = re.compile(r"""["'][^"'\n]*#[0-9a-fA-F]{3,8}\b|QColor\(\s*(["']|\d)|GlobalColor\.(?!transparent)|rgba?\(""")


def test_no_colour_is_named_outside_the_theme():
    """Views paint with palette roles and ui.theme.colour(); light and dark both come from ui/theme.py."""
    named = [f"{path.relative_to(UI.parent)}:{number}: {line.strip()}"
             for path in sorted(UI.rglob("*.py")) if path.name != "theme.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if COLOUR.search(line)]
    assert named == []
