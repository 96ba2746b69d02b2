"""A new user's first minute (issue 31, points 4 and 5), in the real window with a real worker on
the built-in model: loading is said at once and by name, a question asked before the model is in
waits in the chat and is answered once it is, a notice goes when its cause does, and the chat
follows each new message and its answer as the conversation overflows, except while the user
has scrolled up. One window and one worker for all of it; the scripted-engine tests
(tests/ui/controllers/test_first_minute.py) cover the other ways a question or a notice can go.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractSlider

from model_store.installed import EMBEDDED_NAME
from tests.helpers.gui import write_settings
from ui.held_question import WAITING

LOADING = f"Loading {EMBEDDED_NAME}…"
# Questions of a few lines each, so a few turns overflow the chat.
QUESTIONS = [f"Question {n}: in two sentences, what is a lighthouse keeper's day like in {season}? "
             "Say what they check first, what they eat and when they sleep." * 2
             for n, season in enumerate(("winter", "spring", "summer", "autumn", "a storm", "fog", "snow",
                                         "a heat wave", "the holidays", "a power cut"), 1)]


def _in_sight(view, row: int) -> bool:
    widget = view.widgets[row]
    top = widget.mapTo(view.viewport(), QPoint(0, 0)).y()
    return 0 <= top and top + widget.height() <= view.viewport().height()


def _transcript(app) -> list[tuple[str, str, str]]:
    return [(r.message.role, r.message.content, r.message.status) for r in app.controller.messages.rows()]


def _ask(app, question: str) -> None:
    """Send ``question`` and wait until its answer is written and stored, and the view has caught up."""
    app.send_and_wait(question)
    view = app.window.chat_view
    app.wait(lambda: view.complete and app.controller.messages.rowCount() == len(view.widgets), 10_000)
    app.qtbot.wait(50)  # the layout has measured the finished answer


def test_the_first_minute_on_the_built_in_model(start_app, tmp_path):
    write_settings(temperature=0.0, max_tokens=24, draft="off")  # the embedded default model
    app = start_app()
    window, controller = app.window, app.controller
    picker, banner, view = window.model_picker, window.banner, window.chat_view

    # Loading is said from the first moment, by the model's name, in the picker and the telemetry.
    assert picker.state.text() == LOADING and picker.progress.isVisibleTo(picker)
    assert window.telemetry_panel.model_name_label.text() == LOADING
    assert not window.telemetry_dock.isVisible(), "telemetry is one click away, not open"

    # A question asked now waits in the chat, and is answered once the model is in.
    app.type_and_send("What is a lighthouse?")
    assert controller.loaded is None, "asked before the model was in"
    assert _transcript(app) == [("user", "What is a lighthouse?", WAITING)] and window.composer.text() == ""
    assert banner.text() == "", "nothing refused"
    first = app.wait_turn()
    assert first.status == "done" and first.text.strip()
    assert [(role, status) for role, _, status in _transcript(app)] == [("user", "done"), ("assistant", "done")]
    assert _transcript(app)[0][1] == "What is a lighthouse?"
    assert picker.state.text().startswith("Reads up to ") and window.telemetry_panel.model_name_label.text() == EMBEDDED_NAME

    # A notice goes when its cause does: a file that is not a model fails to load; the built-in
    # model chosen again loads, and the failure is no longer said.
    not_a_model = tmp_path / "notes.gguf"
    not_a_model.write_bytes(b"this is a plain text file, not a model at all " * 4)
    picker.model_chosen.emit(str(not_a_model))
    app.wait(lambda: "Choose another model" in banner.text(), 60_000)
    assert banner.kind == "error" and controller.loaded is None
    picker.model_chosen.emit("default")
    app.wait_loaded()
    assert banner.text() == "" and not banner.isVisible()

    # Each new message and its answer are followed as the conversation overflows...
    bar = view.verticalScrollBar()
    questions = iter(QUESTIONS)
    while bar.maximum() == 0:
        _ask(app, next(questions))
    last = controller.messages.rowCount() - 1
    assert bar.value() == bar.maximum() and _in_sight(view, last - 1) and _in_sight(view, last), \
        "the question that overflowed the chat and its answer, both in sight"
    _ask(app, next(questions))
    last = controller.messages.rowCount() - 1
    assert bar.value() == bar.maximum() and _in_sight(view, last - 1) and _in_sight(view, last)

    # ...except while the user has scrolled up: the chat stays where they put it...
    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)
    _ask(app, next(questions))
    assert bar.value() == 0 and not _in_sight(view, controller.messages.rowCount() - 1)

    # ...until they scroll back to the end.
    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMaximum)
    _ask(app, next(questions))
    last = controller.messages.rowCount() - 1
    assert bar.value() == bar.maximum() and _in_sight(view, last)
