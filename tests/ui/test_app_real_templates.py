"""The window on models with real chat templates, against a real worker (issue 30): a reasoning
model's thinking lands in the Thinking section and never in the answer, and every later turn stands
on saved state under Qwen3.5's template, whose re-rendered history drops reasoning."""

from __future__ import annotations

from tests.helpers.gui import stored, write_settings
from tests.helpers.real_models import REAL_SCRIPT, REAL_TINY, SCRIPT, real_model
from tests.helpers.template_turns import TemplateOracle

THOUGHT, ANSWER = (part.strip() for part in SCRIPT.removesuffix("<|im_end|>").split("</think>"))
# read apart from the question: <think> \n (the question's state keeps <|im_start|> assistant \n, which the
# template writes again before the answer once it is history)
CUE_PART_READ_APART = 2


def test_the_window_shows_thinking_apart_and_the_next_turn_stands_on_saved_state(start_app):
    write_settings(model=str(real_model(REAL_SCRIPT)), temperature=0.0, max_tokens=24, draft="off")
    app = start_app()
    app.wait_loaded()
    switch = app.window.composer.thinking
    assert switch.isVisibleTo(app.window) and switch.isEnabled() and switch.isChecked()  # the model thinks by default
    first = app.send_and_wait("Hi")
    second = app.send_and_wait("Again")

    widget = app.window.chat_view.widgets[1]
    assert (first.text, first.reasoning.strip()) == (ANSWER, THOUGHT)
    assert widget.thinking.reasoning.strip() == THOUGHT and not widget.thinking.expanded
    assert THOUGHT not in widget.rendered_text() and ANSWER in widget.rendered_text()
    assert app.transcript()[1] == ("assistant", ANSWER, "done")
    report = second.finished.snapshot
    assert report.restored and report.restored_tokens == first.finished.snapshot.prefilled_tokens - CUE_PART_READ_APART


def test_every_later_turn_in_the_window_reads_only_what_is_new_under_qwen35s_template(start_app):
    model = real_model(REAL_TINY["qwen35"])
    write_settings(model=str(model), temperature=0.0, max_tokens=12, draft="off")
    app = start_app()
    app.wait_loaded()
    turns = [app.send_and_wait(text) for text in ("Hello!", "Tell me about rivers.", "Why is the sky blue?")]
    conversation_id = app.controller.conversation.id
    branch = stored(app, lambda store: store.current_branch(conversation_id))
    oracle = TemplateOracle(model, 0.0)
    try:
        for index, turn in enumerate(turns[1:], start=1):
            report = turn.finished.snapshot
            assert report.restored, report.notes
            assert report.prefilled_tokens <= oracle.most_read(branch[:2 * index + 1])
    finally:
        oracle.close()
