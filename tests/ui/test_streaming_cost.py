"""A streamed delta costs the window in proportion to the delta, not to the answer: the controller
hands the message model the delta alone, the model hands it to the answer's widget, and the widget
adds it to what it has; the stored answer replaces the row once, at the end. (How long that takes
early and late in a long answer is measured by tests/bench/bench_ui_latency.py, not here.)"""

from __future__ import annotations

from dataclasses import replace

from app.services.chat_rows import MessageRow
from engine import protocol as p
from model_store.conversations import Message
from tests.helpers.gui import write_settings
from ui.item_models.messages import MessageListModel
from ui.views.chat_view import ChatView

N_DELTAS = 4000


def _recorded(obj, name: str, calls: list) -> None:
    """Record each call of ``obj.name`` (its arguments) before it runs."""
    method = getattr(obj, name)

    def record(*args, **kwargs):
        calls.append(args)
        return method(*args, **kwargs)

    setattr(obj, name, record)


def test_each_delta_reaches_the_message_model_alone_and_the_stored_answer_replaces_it(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=400, draft="off")  # long enough to stream
    app = start_app()
    app.wait_loaded()
    messages = app.controller.messages
    appended, updated, deltas = [], [], []
    _recorded(messages, "append_text", appended)
    _recorded(messages, "update_message", updated)
    app.controller.bridge.event.connect(lambda e: deltas.append(e.text) if isinstance(e, p.TokenDelta) else None)

    turn = app.send_and_wait("Tell me about the sea.")

    assert turn.finished is not None and len(deltas) >= 3 and turn.text == "".join(deltas)
    assert [(message_id, text) for message_id, text, _ in appended] == [(turn.answer.id, d) for d in deltas], \
        "each delta is handed to the model as it came: the delta, never the answer so far"
    assert [m.content for (m,) in updated if m.id == turn.answer.id] == ["", turn.text], \
        "the row is replaced twice only: when the turn starts, and by the stored answer"
    assert app.transcript()[-1] == ("assistant", turn.text, "done")
    assert app.window.chat_view.widgets[-1].row.message == turn.answer


def _answer_on_screen(qtbot) -> tuple[MessageListModel, ChatView, Message]:
    question = Message("q1", "c1", None, "user", "Tell me a long story.", "done", 0.0, {})
    answer = Message("a1", "c1", "q1", "assistant", "", "generating", 0.0, {"model": "tiny"})
    model = MessageListModel()
    view = ChatView(model)
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    model.set_rows([MessageRow(question, ["q1"]), MessageRow(answer, ["a1"])])
    qtbot.waitUntil(lambda: view.complete)
    return model, view, answer


def test_the_widget_shows_the_concatenation_of_4000_appended_deltas_then_the_stored_answer(qtbot):
    model, view, answer = _answer_on_screen(qtbot)
    widget = view.widgets[1]
    replaced, heard = [], []
    _recorded(widget, "set_row", replaced)
    model.textAppended.connect(lambda row, text, stats: heard.append((row, text)))
    pieces = [("\n\n" if i % 40 == 0 else " ") + f"word{i}" for i in range(N_DELTAS)]
    live = {"model": "tiny", "draft_spans": []}

    for piece in pieces:
        model.append_text("a1", piece, live)

    text = "".join(pieces)
    assert heard == [(1, piece) for piece in pieces], "the view is told each delta, not the answer so far"
    assert replaced == [], "no delta makes the widget take a whole new message"
    assert widget.row.message.content == text and model.row(1).message.content == text
    qtbot.waitUntil(lambda: widget.rendered_text().split() == text.split(), timeout=10_000)
    assert widget.state.text() == "writing…"

    stored = replace(answer, content=text, status="done", stats={"model": "tiny", "timings": {"gen_n": N_DELTAS}})
    model.update_message(stored)
    assert widget.row.message == stored and model.row(1).message == stored
    assert widget.state.isHidden() and not widget.show_all.isHidden(), "the stored long answer starts collapsed"
    widget.show_all.click()
    assert widget.rendered_text().split() == text.split()


def test_a_row_read_mid_stream_has_every_delta_so_far(qtbot):
    model, view, answer = _answer_on_screen(qtbot)
    model.append_text("a1", "The sea")
    assert [r.message.content for r in model.rows()] == ["Tell me a long story.", "The sea"]
    model.append_text("a1", " is wide.", {"model": "tiny", "draft_spans": [[7, False], [9, True]]})
    assert model.row(1).message.content == "The sea is wide." == view.widgets[1].row.message.content
    assert model.row(1).message.stats["draft_spans"] == [[7, False], [9, True]]
    model.append_text("elsewhere", "ignored")  # a message not on screen (another conversation's answer)
    assert model.row(1).message.content == "The sea is wide."
