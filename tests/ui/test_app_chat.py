"""The app against a real worker: send and stream, stop, regenerate, edit into a branch."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument, QTextFormat
from PySide6.QtWidgets import QApplication

from tests.helpers.gui import LONG_ANSWER, write_settings


def test_a_message_streams_token_by_token_then_is_stored(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=400, draft="off")  # long enough to stream
    app = start_app()
    app.wait_loaded()
    seen: list[str] = []
    app.controller.messages.dataChanged.connect(
        lambda top, *_: seen.append(app.controller.messages.row(top.row()).message.content))
    turn = app.send_and_wait("Tell me about the sea.")

    assert turn.finished is not None and turn.finished.finish_reason in ("stop", "length")
    growing = [text for text in seen if text]
    assert len(set(growing)) >= 3, "the answer should appear in several steps, not at once"
    assert all(later.startswith(earlier) for earlier, later in zip(growing, growing[1:-1]))
    assert app.transcript() == [("user", "Tell me about the sea.", "done"), ("assistant", turn.text, "done")]
    shown = app.window.chat_view.widgets[1].rendered_text()
    assert turn.text and set(re.findall(r"[A-Za-z]{3,}", turn.text)) == set(re.findall(r"[A-Za-z]{3,}", shown))
    assert app.window.composer.text() == "", "a sent message leaves the composer"
    app.wait_idle_store()
    titles = [app.controller.conversations.conversation(i).title
              for i in range(app.controller.conversations.rowCount())]
    assert titles == ["Tell me about the sea."]
    tooltip = app.window.chat_view.widgets[1].toolTip()
    assert f"{turn.finished.timings.gen_n} tokens" in tooltip and "tok/s" in tooltip


def test_shift_enter_adds_a_line_and_enter_sends(start_app, tiny_settings, qtbot):
    app = start_app()
    app.wait_loaded()
    composer = app.window.composer.edit
    composer.setFocus()
    qtbot.keyClicks(composer, "first line")
    qtbot.keyClick(composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(composer, "second line")
    assert composer.toPlainText() == "first line\nsecond line"
    qtbot.keyClick(composer, Qt.Key.Key_Return)
    app.wait_turn()
    assert app.transcript()[0][1] == "first line\nsecond line"


def test_escape_stops_the_answer_and_keeps_it_marked_stopped_not_interrupted(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=LONG_ANSWER, draft="off")
    app = start_app()
    app.wait_loaded()
    app.type_and_send("Write a very long story.")
    app.qtbot.waitUntil(lambda: len(app.controller.messages.rows()) == 2
                        and len(app.controller.messages.row(1).message.content) > 20, timeout=60_000)
    assert app.window.composer.send_button.text() == "Stop"
    app.qtbot.keyClick(app.window.composer.edit, Qt.Key.Key_Escape)
    turn = app.wait_turn()

    assert turn.finished.finish_reason == "cancelled"
    assert turn.finished.timings.gen_n < LONG_ANSWER
    role, text, status = app.transcript()[1]
    assert (role, status) == ("assistant", "stopped") and text == turn.text and len(text) > 20
    assert app.window.composer.send_button.text() == "Send"
    assert app.window.chat_view.widgets[1].state.text() == "stopped", "a stop the user asked for is not a crash"


def _wait_until_writing(app, row: int) -> None:
    messages = app.controller.messages
    app.qtbot.waitUntil(lambda: messages.rowCount() == row + 1 and len(messages.row(row).message.content) > 20,
                        timeout=60_000)


def test_escape_anywhere_in_the_window_and_the_stop_button_stop_the_answer(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=LONG_ANSWER, draft="off")
    app = start_app()
    app.wait_loaded()
    app.type_and_send("Write a very long story.")
    _wait_until_writing(app, row=1)
    conversations = app.window.conversation_panel.list
    conversations.setFocus()
    assert QApplication.focusWidget() is conversations
    app.qtbot.keyClick(conversations, Qt.Key.Key_Escape)
    assert app.wait_turn(1).finished.finish_reason == "cancelled"

    app.type_and_send("Go on, at length.")
    _wait_until_writing(app, row=3)
    stop = app.window.composer.send_button
    assert stop.text() == "Stop"
    app.qtbot.mouseClick(stop, Qt.MouseButton.LeftButton)
    assert app.wait_turn(2).finished.finish_reason == "cancelled"
    assert [m[2] for m in app.transcript()] == ["done", "stopped", "done", "stopped"]

    # With no answer being written, Esc belongs to the widgets again: in the composer it leaves an edit.
    app.qtbot.waitUntil(lambda: app.window.chat_view.complete, timeout=10_000)
    app.qtbot.mouseClick(app.window.chat_view.widgets[2].edit, Qt.MouseButton.LeftButton)
    assert app.window.composer.editing_note.isVisible() and app.window.composer.text() == "Go on, at length."
    app.qtbot.keyClick(app.window.composer.edit, Qt.Key.Key_Escape)
    assert not app.window.composer.editing_note.isVisible() and app.window.composer.text() == ""


def test_regenerate_keeps_the_first_answer_as_another_version(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, max_tokens=16,
                   draft="off")
    app = start_app()
    app.wait_loaded()
    first = app.send_and_wait("Name a colour.")
    app.window.regenerate_action.trigger()  # Edit → Regenerate answer (Ctrl+R)
    second = app.wait_turn(2)

    assert second.user.id == first.user.id and second.answer.id != first.answer.id
    answer_widget = app.window.chat_view.widgets[1]
    assert answer_widget.version.text() == "2/2" and answer_widget.version.isVisible()
    assert app.transcript()[1][1] == second.text
    app.qtbot.mouseClick(answer_widget.previous, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: app.controller.messages.row(1).message.id == first.answer.id, timeout=10_000)
    assert app.transcript()[1][1] == first.text
    assert app.window.chat_view.widgets[1].version.text() == "1/2"


def test_editing_a_message_makes_a_branch_and_the_old_one_stays_reachable(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.send_and_wait("First question")
    app.send_and_wait("Second question")
    original = app.transcript()

    first_user = app.window.chat_view.widgets[0]
    app.qtbot.mouseClick(first_user.edit, Qt.MouseButton.LeftButton)
    assert app.window.composer.text() == "First question" and app.window.composer.editing_note.isVisible()
    app.type_and_send("First question, edited")
    app.wait_turn(3)

    edited = app.transcript()
    assert [m[:2] for m in edited][0] == ("user", "First question, edited") and len(edited) == 2
    assert app.window.chat_view.widgets[0].version.text() == "2/2"
    app.qtbot.mouseClick(app.window.chat_view.widgets[0].previous, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: len(app.controller.messages.rows()) == 4, timeout=10_000)
    assert app.transcript() == original


REPEAT_PROMPT = ("Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet "
                 "river bank.")


def _highlighted_runs(html: str) -> list[str]:
    doc = QTextDocument()
    doc.setHtml(html)
    runs, block = [], doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().hasProperty(QTextFormat.Property.BackgroundBrush):
                runs.append(fragment.text())
            it += 1
        block = block.next()
    return runs


def test_text_from_accepted_prompt_lookup_drafts_is_highlighted_and_counted(start_app):
    write_settings(model="default", temperature=0.0, max_tokens=48, draft="lookup", highlight_drafts=True)
    app = start_app()
    app.wait_loaded()
    assert app.window.highlight_action.isChecked()
    turn = app.send_and_wait(REPEAT_PROMPT)  # SmolLM2 copies the sentence: its n-grams are in the prompt
    draft = turn.finished.draft
    assert draft.kind == "lookup" and draft.accepted > 0

    widget = app.window.chat_view.widgets[1]
    spans = widget.row.message.stats["draft_spans"]
    assert sum(length for length, _ in spans) == len(widget.row.message.content) == len(turn.text)
    at, drafted = 0, []
    for length, from_draft in spans:
        if from_draft:
            drafted.append(turn.text[at:at + length])
        at += length
    assert drafted and all(piece.strip() in REPEAT_PROMPT for piece in drafted), drafted
    highlighted = _highlighted_runs(widget.body.text())
    assert highlighted and "".join(highlighted).split() == "".join(drafted).split()
    assert f"guesses ahead: {draft.accepted:,} of {draft.drafted:,} kept" in widget.toolTip()
