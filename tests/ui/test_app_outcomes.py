"""How an answer ended, in the real window with a real worker (issue 31, point 8): an answer the full
context cut off is stored so and marked under it, also after the app starts again; a question that
fails keeps its reason on its answer across a restart; and what the worker says names the model as
the catalogue does, not by its file's training label."""

from __future__ import annotations

from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.fit import AVAILABLE_MEMORY_ENV
from model_store.installed import EMBEDDED_NAME
from tests.helpers.documents import write_document
from tests.helpers.gui import stored, write_settings
from ui.views.message_widget import MessageWidget

CUT_OFF_LINE = "Cut off: the context is full."
RAW_NAME = "Smollm2 135M 8k Lc100K Mix1 Ep2"  # the embedded file's general.name


def shown(app, message_id: str) -> MessageWidget:
    """The chat view's widget of a message, once it shows the message as stored."""
    def widget() -> MessageWidget | None:
        found = [w for w in app.window.findChildren(MessageWidget) if w.row.message.id == message_id]
        return found[0] if found else None
    app.wait(lambda: widget() is not None, 30_000)
    return widget()


def start_again(start_app, app, conversation_id: str):
    app.window.close()
    again = start_app()
    again.wait_loaded()
    again.controller.open_conversation(conversation_id)
    return again


def test_an_answer_the_context_cut_off_is_marked_and_still_is_after_a_restart(start_app, hybrid_tiny, monkeypatch):
    memory = model_memory(hybrid_tiny, check_model_file(hybrid_tiny))
    # a machine whose memory holds a 256-token context for it and no longer (with its drafting planes)
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(-(-memory.total_bytes(384, planes=5) * 100 // 70)))
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=400, draft="off")
    app = start_app()
    app.wait_loaded()
    assert app.controller.loaded.n_ctx == 256
    turn = app.send_and_wait("Tell me a long story about the mill.")
    assert turn.finished.finish_reason == "length" and turn.finished.cut_by == "context", turn.errors
    assert turn.finished.timings.gen_n < 400, "the context, not max_tokens, ended it"
    answer = stored(app, lambda store: store.message(turn.answer.id))
    assert (answer.status, answer.finish, answer.cut_off) == ("done", "context", True)
    widget = shown(app, answer.id)
    app.wait(lambda: widget.outcome.isVisible())
    assert widget.outcome.text() == CUT_OFF_LINE

    again = start_again(start_app, app, turn.conversation_id)
    widget = shown(again, answer.id)
    again.wait(widget.outcome.isVisible)
    assert widget.outcome.text() == CUT_OFF_LINE
    assert not shown(again, turn.user.id).outcome.isVisible(), "the question has no such line"


def test_a_question_longer_than_the_model_was_trained_on_fails_naming_it_and_keeps_its_reason(
        start_app, tmp_path):
    write_settings(model="default", temperature=0.0, max_tokens=8, draft="off")
    app = start_app()
    app.wait_loaded()
    too_long = write_document(tmp_path / "paste.txt", 9000).read_text(encoding="utf-8")  # > 8,192 SmolLM2 tokens
    turn = app.send_and_wait(too_long)
    assert turn.status == "error"
    banner = app.window.banner.text()
    assert f"{EMBEDDED_NAME} was trained on 8,192 tokens at most" in banner and RAW_NAME not in banner
    answer = stored(app, lambda store: store.message(turn.answer.id))
    assert answer.status == "error" and f"{EMBEDDED_NAME} was trained on 8,192 tokens" in answer.error

    again = start_again(start_app, app, turn.conversation_id)
    state = shown(again, answer.id).state
    again.wait(state.isVisible)
    assert state.text() == f"failed: {answer.error}", "the reason, not an empty 'failed'"
