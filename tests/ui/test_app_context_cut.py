"""A chat longer than the model can read, in the real window with a real worker and the embedded
SmolLM2 (issue 51, point 8). The machine's memory is pinned so the longest context is 512 tokens: by
default the oldest exchanges are left out, a notice above the answer says so (also after a
restart), every message stays in the window, and the next turn stands on the cut turn's snapshot.
Settings → Chat offers the choices; "stop and tell me" gives the reason on the answer; "continue in a
new conversation" has the model summarize the old one, opens "TITLE (continued)" that starts with the
summary (saying so) and answers the message there."""

from __future__ import annotations

import pytest

from PySide6.QtWidgets import QComboBox

from app.services.context_cut import standing_left_out
from app.services.context_summary import continued_notice
from app.services.settings import Settings
from app.services.chat_rows import load_transcript
from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.app.test_context_cut_cli import NOTICE, fact
from tests.helpers.gui import RunningApp, stored, write_settings
from tests.ui.test_app_outcomes import shown
from tests.ui.test_settings_dialog import child, press_ok, select, tab_of
from ui.views.settings_dialog import SettingsDialog


@pytest.fixture
def small_machine(smollm2, monkeypatch) -> None:
    memory = model_memory(smollm2, check_model_file(smollm2))
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(-(-memory.total_bytes(512) * 100 // 70)))  # 512 tokens at most


def test_the_oldest_messages_are_left_out_with_a_notice_and_the_next_turn_stands_on_saved_state(
        start_app, small_machine):
    write_settings(temperature=0.0, max_tokens=24, draft="off")
    app = start_app()
    app.wait_loaded()
    for n in range(12):
        turn = app.send_and_wait(fact(n))
        assert turn.finished is not None and turn.finished.finish_reason != "error", turn.errors
        if turn.finished.context_cut is not None:
            break
    else:
        raise AssertionError("no turn was cut")
    left_out = turn.finished.context_cut.left_out
    widget = shown(app, turn.answer.id)
    app.wait(widget.context_notice.isVisible)
    assert widget.context_notice.text() == f"The oldest {left_out:,} messages {NOTICE}"
    earlier = [shown(app, row.message.id) for row in app.controller.messages.rows()[:-1]]
    assert not any(w.context_notice.isVisible() for w in earlier), "only the turn that cut says so"
    assert len(app.controller.messages.rows()) == 2 * (n + 1), "every message is still in the window"

    after = app.send_and_wait("How many facts did I tell you?")
    assert after.finished.context_cut is None and after.finished.snapshot.restored
    assert after.finished.snapshot.prefilled_tokens < 40, after.finished.snapshot
    assert stored(app, lambda store: store.message(turn.answer.id)).stats["context_cut"]["left_out"] == left_out


def test_settings_chat_offers_the_choices(qtbot):
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    dialog.show()
    choice = child(dialog, QComboBox, "when_full")
    assert [choice.itemText(i) for i in range(choice.count())] == [
        "leave out the oldest messages", "start a new conversation from a summary",
        "stop and tell me"]
    assert choice.currentData() == "drop-oldest" and tab_of(dialog, "when_full") == "Chat"
    select(choice, "stop")
    press_ok(dialog)
    assert dialog.result_settings == Settings(when_full="stop")


def test_stop_and_tell_me_refuses_the_turn_that_does_not_fit_with_the_reason(start_app, small_machine):
    write_settings(temperature=0.0, max_tokens=24, draft="off", when_full="stop")
    app = start_app()
    app.wait_loaded()
    for n in range(12):
        turn = app.send_and_wait(fact(n))
        assert turn.finished.context_cut is None, "stop never leaves messages out"
        if turn.finished.finish_reason == "error":
            break
    else:
        raise AssertionError("no turn was refused")
    answer = stored(app, lambda store: store.message(turn.answer.id))
    assert answer.status == "error" and "the memory available now holds 512 tokens" in answer.error


def cut_turns(app: RunningApp, cuts: int, facts: int = 16) -> list:
    """Send facts until ``cuts`` turns were cut; those turns."""
    made = []
    for n in range(facts):
        turn = app.send_and_wait(fact(n))
        assert turn.finished is not None and turn.finished.finish_reason != "error", turn.errors
        if turn.finished.context_cut is not None:
            made.append(turn)
            if len(made) == cuts:
                return made
    raise AssertionError(f"only {len(made)} turns were cut")


def test_the_notice_counts_every_message_left_out_as_the_cli_and_the_api_do(start_app, small_machine):
    write_settings(temperature=0.0, max_tokens=24, draft="off")
    app = start_app()
    app.wait_loaded()
    first, second = cut_turns(app, 2)
    history = stored(app, lambda store: store.branch(second.answer.id))
    total = standing_left_out(history)  # what `hearth send` and the API say (app.services.context_cut)
    assert total > second.finished.context_cut.left_out, "the second cut leaves out more than it newly cut"
    for turn in (first, second):
        widget = shown(app, turn.answer.id)
        app.wait(widget.context_notice.isVisible)
    assert shown(app, second.answer.id).context_notice.text() == f"The oldest {total:,} messages {NOTICE}"
    rows = stored(app, lambda store: load_transcript(store, second.conversation_id))  # as a reopened window reads it
    assert [r.left_out for r in rows if r.left_out] == [first.finished.context_cut.left_out, total]


def test_summary_continues_in_a_new_conversation_that_starts_with_the_models_summary(start_app, small_machine):
    write_settings(temperature=0.0, max_tokens=24, draft="off", when_full="summary")
    app = start_app()
    app.wait_loaded()
    old = app.send_and_wait(fact(0)).conversation_id
    old_title = stored(app, lambda store: store.get(old).title)
    for n in range(1, 12):
        refused = app.send_and_wait(fact(n))
        if app.controller.conversation.id != old:
            break
        assert refused.conversation_id == old and refused.finished.finish_reason != "error", refused.errors
    else:
        raise AssertionError("the conversation never continued in a new one")
    assert refused.conversation_id == old and refused.finished.finish_reason == "error"
    answered = app.finished_turns[-1]
    new = app.controller.conversation
    assert answered.conversation_id == new.id and new.title == f"{old_title} (continued)"
    assert answered.finished.finish_reason != "error" and answered.answer.status == "done" and answered.answer.content

    (summary, question, answer) = app.transcript()
    assert summary[0] == "user" and summary[1].startswith(f'Summary of the earlier conversation ("{old_title}"):')
    assert len(summary[1]) > 60, summary
    assert question[:2] == ("user", fact(n)) and answer == ("assistant", answered.answer.content, "done")
    first = shown(app, app.controller.messages.rows()[0].message.id)
    app.wait(first.context_notice.isVisible)
    assert first.context_notice.text() == continued_notice(old_title)
    assert shown(app, answered.answer.id).row.message.content == answered.answer.content

    assert set(app.controller.conversations.ids()) >= {old, new.id}, "the old conversation stays in the list"
    kept = stored(app, lambda store: store.current_branch(old))
    assert len(kept) == 2 * (n + 1) and kept[-2].content == fact(n), "the old conversation is kept as it was"
