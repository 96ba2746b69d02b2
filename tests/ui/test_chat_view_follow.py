"""The chat view keeps a new message and its streaming answer in sight (issue 31, point 5): from the
turn where the conversation first overflows, unless the user has scrolled up, where it then stays
until the user scrolls back to the end. The real view on a real message model, no window."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractSlider

from app.services.chat_rows import MessageRow
from model_store.conversations import Message
from ui.item_models.messages import MessageListModel
from ui.views.chat_view import ChatView

QUESTION = "Tell me about lighthouses: who kept them, how the lamps worked, and why so many are automatic now."


def _row(n: int, role: str, content: str, status: str = "done") -> MessageRow:
    message = Message(id=f"m{n}", conversation_id="c", parent_id=f"m{n - 1}" if n else None, role=role,
                      content=content, status=status, created_at=time.time(), stats={})
    return MessageRow(message, [message.id])


def _turn(rows: list[MessageRow], question: str) -> list[MessageRow]:
    """``rows`` and a new question with its answer being written."""
    n = len(rows)
    return rows + [_row(n, "user", question), _row(n + 1, "assistant", "", "generating")]


@pytest.fixture
def chat(qtbot):
    model = MessageListModel()
    view = ChatView(model)
    qtbot.addWidget(view)
    view.resize(640, 420)
    view.show()
    qtbot.waitExposed(view)
    return view, model


def _in_sight(view: ChatView, row: int) -> bool:
    widget = view.widgets[row]
    top = widget.mapTo(view.viewport(), QPoint(0, 0)).y()
    return 0 <= top and top + widget.height() <= view.viewport().height()


def _stream(qtbot, model: MessageListModel, words: int) -> None:
    answer_id = model.row(model.rowCount() - 1).message.id
    for i in range(words):
        model.append_text(answer_id, f"word{i} " + ("\n\n" if i % 6 == 5 else ""))
        qtbot.wait(5)  # the layout measures the longer answer between deltas, as it does while tokens arrive


def _first_turn(paragraphs: int) -> list[MessageRow]:
    return [_row(0, "user", "Hello?"), _row(1, "assistant", "\n\n".join(["A paragraph of the first answer."] * paragraphs))]


def _settled(qtbot, view: ChatView) -> int:
    """The scroll range once every row has its widget and the layout has stopped changing it (a
    loaded machine's event loop may measure a new transcript late)."""
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: view.complete, timeout=2_000)
    last = None
    while bar.maximum() != last:
        last = bar.maximum()
        qtbot.wait(40)
    return last


def _grow_until_it_overflows(qtbot, view: ChatView, model: MessageListModel) -> None:
    """A first turn that just fits, then the turn that overflows as it is sent (the case where the
    question sat half in sight): its question, and its answer streaming until it overflows and a
    while after."""
    bar = view.verticalScrollBar()
    paragraphs = 2
    while True:  # the longest first answer that still fits
        model.set_rows(_first_turn(paragraphs + 1))
        if _settled(qtbot, view) > 0:
            break
        paragraphs += 1
    paragraphs -= 1  # a paragraph's margin: clear of the scroll bar's own come and go
    model.set_rows(_first_turn(paragraphs))
    assert _settled(qtbot, view) == 0, "the first turn fits"
    model.set_rows(_turn(_first_turn(paragraphs), QUESTION))
    for _ in range(10):  # streamed until the layout has measured an overflowing conversation
        _stream(qtbot, model, 6)
        if _settled(qtbot, view) > 0:
            break
    assert bar.maximum() > 0, "60 streamed words overflow the chat"
    _stream(qtbot, model, 6)


def test_the_turn_that_first_overflows_stays_in_sight_question_and_streaming_answer(chat, qtbot):
    view, model = chat
    _grow_until_it_overflows(qtbot, view, model)
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=1_000)
    assert _in_sight(view, 2) and _in_sight(view, 3), "the new question and its answer, whole"


def test_scrolled_up_the_view_stays_put_and_back_at_the_end_it_follows_again(chat, qtbot):
    view, model = chat
    _grow_until_it_overflows(qtbot, view, model)
    bar = view.verticalScrollBar()
    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)  # the user scrolls up to read
    _stream(qtbot, model, 18)
    model.set_rows(_turn(model.rows(), "And lightships?"))
    qtbot.wait(20)
    assert bar.value() == 0 and bar.maximum() > 0, "left where the user put it"

    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMaximum)  # back to the end
    _stream(qtbot, model, 18)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=1_000)
    assert _in_sight(view, model.rowCount() - 1)
