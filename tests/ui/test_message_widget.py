"""One message on screen: collapsed when long, copy, highlight of drafted text, stats on hover."""

from PySide6.QtGui import QGuiApplication

from app.services.chat_rows import MessageRow
from model_store.conversations import Message
from ui.views.message_widget import COLLAPSE_CHARS, MessageWidget


def _row(content: str, role: str = "assistant", status: str = "done", stats: dict | None = None) -> MessageRow:
    message = Message("m1", "c1", None, role, content, status, 0.0, stats or {})
    return MessageRow(message, ["m1"])


def test_a_long_message_starts_collapsed_and_show_all_reveals_it(qtbot):
    lines = [f"line {i} of a long pasted text" for i in range(400)]
    widget = MessageWidget(_row("\n".join(lines), role="user"))
    qtbot.addWidget(widget)
    shown = widget.rendered_text()
    assert len(shown) <= COLLAPSE_CHARS + 10 and "line 0 " in shown and "line 399" not in shown
    assert not widget.show_all.isHidden() and "more characters" in widget.show_all.text()
    widget.show_all.click()
    assert "line 399 of a long pasted text" in widget.rendered_text() and widget.show_all.isHidden()


def test_copy_takes_the_whole_text_even_when_collapsed(qtbot):
    text = "word " * 2000
    widget = MessageWidget(_row(text))
    qtbot.addWidget(widget)
    widget.copy.click()
    assert QGuiApplication.clipboard().text() == text


def test_a_streaming_answer_is_not_collapsed(qtbot):
    widget = MessageWidget(_row("x " * 3000, status="generating"))
    qtbot.addWidget(widget)
    qtbot.waitUntil(lambda: widget.rendered_text().count("x") == 3000, timeout=5_000)
    assert widget.show_all.isHidden()


def test_highlighting_drafts_marks_only_drafted_text_keeps_markdown_and_hover_shows_stats(qtbot):
    stats = {"draft_spans": [[6, False], [9, True]], "timings": {"gen_n": 3, "gen_ms": 100.0, "ttft_ms": 40.0},
             "draft": {"kind": "lookup", "drafted": 4, "accepted": 2}}
    widget = MessageWidget(_row("hello **world**", stats=stats))
    qtbot.addWidget(widget)
    assert "background-color" not in widget.body.text()
    widget.set_highlight_drafts(True)
    assert widget.body.text().count("background-color") == 1 and widget.rendered_text().strip() == "hello world"
    assert "font-weight:700; background-color" in widget.body.text(), "the drafted word is still bold"
    assert "3 tokens" in widget.toolTip() and "2 of 4" in widget.toolTip()


def test_a_switch_to_a_dark_palette_re_renders_code_in_the_new_colours(qtbot, qapp):
    from PySide6.QtGui import QColor, QPalette

    widget = MessageWidget(_row("Run:\n\n```\nhearth\n```"))
    qtbot.addWidget(widget)
    light_html = widget.body.text()
    original = qapp.palette()
    dark = QPalette(original)
    for role, colour in ((QPalette.ColorRole.Window, "#202124"), (QPalette.ColorRole.Base, "#171717"),
                         (QPalette.ColorRole.Text, "#e8e8e8"), (QPalette.ColorRole.WindowText, "#e8e8e8")):
        dark.setColor(role, QColor(colour))
    try:
        qapp.setPalette(dark)
        qtbot.waitUntil(lambda: widget.body.text() != light_html, timeout=5_000)
        assert "rgba(232,232,232" in widget.body.text(), "the code background is a tint of the dark theme's text"
    finally:
        qapp.setPalette(original)


def test_a_question_is_filled_from_the_palette_and_an_answer_is_not_framed(qtbot, qapp):
    from PySide6.QtGui import QColor, QPalette

    question, answer = MessageWidget(_row("Why?", role="user")), MessageWidget(_row("Because."))
    for widget in (question, answer):
        qtbot.addWidget(widget)
    assert (question.kind, answer.kind) == ("question", "answer") and answer.bubble.fill_colour() is None
    assert question.bubble.fill_colour().rgb() == qapp.palette().color(QPalette.ColorRole.AlternateBase).rgb()
    original = qapp.palette()
    dark = QPalette(original)
    other = QColor("#3d7ab8") if original.color(QPalette.ColorRole.AlternateBase) != QColor("#3d7ab8") else QColor("#aa5500")
    dark.setColor(QPalette.ColorRole.AlternateBase, other)
    try:
        qapp.setPalette(dark)
        qtbot.waitUntil(lambda: question.bubble.fill_colour().rgb() == other.rgb(), timeout=5_000)  # retinted
    finally:
        qapp.setPalette(original)


def test_the_hover_statistics_never_cover_the_answer(qtbot):
    """Issue 51: the answer's tooltip ("… tokens · … tok/s", why drafting is off) covered the answer."""
    from PySide6.QtCore import QEvent, QPoint, QRect
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication

    stats = {"timings": {"gen_n": 42, "gen_ms": 2000.0, "ttft_ms": 120.0}}
    widget = MessageWidget(_row("A paragraph of the answer. " * 40, stats=stats))
    qtbot.addWidget(widget)
    widget.resize(1100, 500)
    widget.show()
    qtbot.waitExposed(widget)
    inside = widget.body.mapTo(widget, widget.body.rect().center())
    QApplication.sendEvent(widget, QHelpEvent(QEvent.Type.ToolTip, inside, widget.mapToGlobal(inside)))
    tips = [w for w in QApplication.topLevelWidgets() if w.metaObject().className() == "QTipLabel" and w.isVisible()]
    assert tips and "42 tokens" in tips[0].text()
    body = QRect(widget.body.mapToGlobal(QPoint(0, 0)), widget.body.size())
    assert not tips[0].geometry().intersects(body), (tips[0].geometry(), body)
