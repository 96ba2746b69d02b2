"""A reasoning model's answer on screen: its thinking streams in a section above the text, closes to
"Thought for … · … words" when the answer begins, opens on a click or a key, stays out of the
answer's text and of Copy, and is shown as plain text whatever it holds."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.services.chat_rows import MessageRow
from model_store.conversations import Message
from ui.item_models.messages import MessageListModel
from ui.views.chat_view import ChatView
from ui.views.message_widget import MessageWidget
from ui.views.thinking_section import reasoning_header, visible_reasoning

REASONING = "The user greets me. I should greet them back, briefly."


def _answer(content: str = "", *, reasoning: str = "", status: str = "done", stats: dict | None = None) -> Message:
    return Message("a1", "c1", "q1", "assistant", content, status, 0.0, stats or {}, reasoning)


def _widget(qtbot, message: Message) -> MessageWidget:
    widget = MessageWidget(MessageRow(message, [message.id]))
    qtbot.addWidget(widget)
    widget.resize(700, 400)
    widget.show()
    return widget


def _shown(widget: MessageWidget) -> bool:
    """The reasoning's text is on screen (the section open)."""
    return widget.thinking.isVisible() and widget.thinking.text.isVisible()


def test_streamed_reasoning_shows_while_thinking_and_closes_to_its_time_and_length_when_the_answer_begins(qtbot):
    widget = _widget(qtbot, _answer(status="generating", stats={"model": "qwen"}))
    assert widget.thinking.isHidden(), "nothing thought yet: no section"

    for piece in ("The user", " greets me.", " I should greet", " them back, briefly."):
        widget.append_reasoning(piece)
    qtbot.waitUntil(lambda: widget.thinking.text.text() == REASONING, timeout=2_000)
    assert _shown(widget) and widget.thinking.header.text() == "Thinking… · 10 words"
    assert widget.body.isHidden(), "the section shows the progress, not a '…' under it"

    widget.append_text("Hello", {"model": "qwen", "thinking_s": 3.21})
    widget.append_text(" there!")
    qtbot.waitUntil(lambda: widget.rendered_text().strip() == "Hello there!", timeout=2_000)
    assert widget.thinking.isVisible() and not widget.thinking.text.isVisible(), "closed once the answer began"
    assert widget.thinking.header.text() == "Thought for 3.2 s · 10 words"
    assert "greet" not in widget.rendered_text() and "greet" not in widget.body.text()

    widget.thinking.header.click()
    assert _shown(widget) and widget.thinking.text.text() == REASONING
    widget.thinking.header.click()
    assert not widget.thinking.text.isVisible()

    stored = _answer("Hello there!", reasoning=REASONING, stats={"model": "qwen", "thinking_s": 3.31})
    widget.thinking.header.click()
    widget.set_row(MessageRow(stored, ["a1"]))
    assert _shown(widget), "the stored answer replacing the live one keeps the section as the user left it"
    assert widget.thinking.header.text() == "Thought for 3.3 s · 10 words"


def test_the_header_is_a_focusable_button_that_the_keyboard_opens(qtbot):
    widget = _widget(qtbot, _answer("Hi.", reasoning=REASONING, stats={"thinking_s": 0.4}))
    header = widget.thinking.header
    assert header.focusPolicy() & Qt.FocusPolicy.TabFocus and not widget.thinking.expanded
    assert header.text() == "Thought for 400 ms · 10 words"
    header.setFocus()
    qtbot.keyClick(header, Qt.Key.Key_Space)
    assert widget.thinking.expanded and _shown(widget) and header.accessibleName().endswith("shown")
    qtbot.keyClick(header, Qt.Key.Key_Space)
    assert not widget.thinking.expanded and header.accessibleName().endswith("hidden")


def test_copy_takes_the_answer_alone(qtbot):
    widget = _widget(qtbot, _answer("The answer.", reasoning=REASONING))
    widget.copy.click()
    assert QGuiApplication.clipboard().text() == "The answer."


def test_a_stored_answer_with_reasoning_opens_closed_and_one_without_has_no_section(qtbot):
    thought = _widget(qtbot, _answer("Hi.", reasoning=REASONING, stats={"thinking_s": 1.5}))
    assert thought.thinking.isVisible() and not thought.thinking.text.isVisible()
    assert thought.thinking.text.text() == "", "a closed section has not laid its text out"
    assert thought.thinking.header.text() == "Thought for 1.5 s · 10 words"
    plain = _widget(qtbot, _answer("Hi."))
    assert plain.thinking.isHidden() and plain.body.isVisible() and plain.rendered_text().strip() == "Hi."
    unrecorded = _widget(qtbot, _answer("Hi.", reasoning="One word"))
    assert unrecorded.thinking.header.text() == "Thought · 2 words"


def test_another_message_in_the_same_widget_starts_closed(qtbot):
    widget = _widget(qtbot, _answer("Hi.", reasoning=REASONING))
    widget.thinking.header.click()
    assert _shown(widget)
    other = replace(_answer("Hello.", reasoning="Other thoughts."), id="a2")
    widget.set_row(MessageRow(other, ["a1", "a2"]))
    assert widget.thinking.isVisible() and not widget.thinking.text.isVisible()


def test_hostile_reasoning_is_shown_as_text(qtbot):
    hostile = ("<b>bold</b> <script>alert('x')</script> <img src=x onerror=alert(1)> &amp; **not markdown**"
               "\x00nul\x07bell\x1b[31mred\x7f\x85\r\nnext line\ttab")
    widget = _widget(qtbot, _answer("Fine.", reasoning=hostile))
    widget.thinking.header.click()
    label = widget.thinking.text
    assert label.textFormat() == Qt.TextFormat.PlainText
    shown = label.text()
    assert "<b>bold</b> <script>alert('x')</script> <img src=x onerror=alert(1)> &amp; **not markdown**" in shown
    assert shown.endswith("\u2400nul\u2407bell\u241b[31mred\u2421\ufffd\nnext line\ttab")
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in shown)
    assert label.heightForWidth(600) > 0 and label.text_width() > 0, "measured as plain text"
    assert widget.rendered_text().strip() == "Fine." and "script" not in widget.body.text()


def test_the_helpers_words_and_times():
    assert visible_reasoning("\n\n  a\r\nb\x00 \n") == "a\nb\u2400"
    assert reasoning_header("one", thinking=True, seconds=None) == "Thinking… · 1 word"
    assert reasoning_header("a " * 1500, thinking=False, seconds=75.0) == "Thought for 1 min 15 s · 1,500 words"


def test_reasoning_streams_through_the_message_model_to_its_widget_alone(qtbot):
    question = Message("q1", "c1", None, "user", "Hi", "done", 0.0, {})
    model = MessageListModel()
    view = ChatView(model)
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    model.set_rows([MessageRow(question, ["q1"]), MessageRow(_answer(status="generating"), ["a1"])])
    qtbot.waitUntil(lambda: view.complete)
    changed = []
    model.dataChanged.connect(lambda *args: changed.append(args))

    model.append_reasoning("a1", "Let me")
    model.append_reasoning("a1", " think.")
    model.append_reasoning("elsewhere", "ignored")

    assert changed == [], "reasoning is not the row's display text"
    assert model.row(1).message.reasoning == "Let me think." and model.row(1).message.content == ""
    widget = view.widgets[1]
    assert widget.row.message.reasoning == "Let me think."
    qtbot.waitUntil(lambda: widget.thinking.text.text() == "Let me think.", timeout=2_000)
    model.append_text("a1", "Hello.")
    assert model.row(1).message.content == "Hello." and model.row(1).message.reasoning == "Let me think."
