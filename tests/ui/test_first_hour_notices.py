"""A new user's first hour (issue 17), continued: notices that go with the conversation that raised
them, and a document loaded twice; in the real window with a real worker."""

from __future__ import annotations

from PySide6.QtCore import Qt

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.helpers.documents import write_document
from tests.helpers.gui import stored
from ui.views.document_progress import LoadedBeforeChoice

TOO_LONG = "lighthouse keeper " * 30_000  # more tokens than the tiny model's context holds


# -- 4. Notices that outlive their reason ----------------------------------------------------------

def _fail_a_turn(app) -> str:
    """Send a message the context cannot hold; the banner's error text."""
    app.send_and_wait(TOO_LONG)
    app.qtbot.waitUntil(lambda: "tokens of context, but" in app.window.banner.text(), timeout=30_000)
    return app.window.banner.text()


def test_an_answers_error_goes_when_its_conversation_is_left_or_a_later_answer_there_succeeds(
        start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    window = app.window
    _fail_a_turn(app)
    failed_in = app.controller.conversation.id
    window.new_chat()
    assert window.banner.text() == "", "Ctrl+N leaves the conversation the error was about"

    app.send_and_wait("Hello there.")
    assert window.banner.text() == ""
    app.controller.open_conversation(failed_in)
    app.qtbot.waitUntil(lambda: app.controller.conversation.id == failed_in, timeout=30_000)
    _fail_a_turn(app)
    app.send_and_wait("Something short instead.")
    assert window.banner.text() == "", "a later answer in the same conversation succeeded"


def test_a_notice_about_the_app_stays_when_the_conversation_changes(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    app.controller.notice.emit("warning", "The NPU driver is out of date.")
    app.window.new_chat()
    assert app.window.banner.text() == "The NPU driver is out of date.", "only a conversation's notices go with it"


def test_the_snapshot_line_of_a_conversation_goes_on_a_new_chat(start_app, tiny_settings, hearth_home):
    db = open_database(database_path(hearth_home / "data"))
    store = ConversationStore(db)
    conversation = store.create("Written elsewhere", model=str(tiny_settings.model))
    user = store.add_message(conversation.id, "user", "What is a lighthouse?", parent_id=None)
    store.add_message(conversation.id, "assistant", "A tower with a light.", parent_id=user.id)
    db.close()
    app = start_app()
    app.wait_loaded()
    app.qtbot.waitUntil(lambda: app.controller.conversations.rowCount() == 1, timeout=30_000)
    app.controller.open_conversation(conversation.id)
    app.qtbot.waitUntil(lambda: "No snapshot used" in app.window.status_line.text(), timeout=60_000)
    app.window.new_chat()
    assert app.window.status_line.text() == ""


# -- 9. The same document twice --------------------------------------------------------------------

def _attach_in_a_new_chat(app, path) -> None:
    app.window.new_chat()
    assert app.window.documents.attach(path)


def _choice(app) -> LoadedBeforeChoice:
    documents = app.window.documents
    app.qtbot.waitUntil(lambda: documents.loaded_before_choice is not None, timeout=60_000)
    return documents.loaded_before_choice


def _read(app, count: int) -> None:
    app.qtbot.waitUntil(lambda: not app.window.documents.busy and app.controller.conversations.rowCount() == count,
                        timeout=120_000)


def test_the_same_document_again_offers_its_conversation_or_a_second_copy_named_apart(
        start_app, tiny_settings, tmp_path):
    app = start_app()
    app.wait_loaded()
    report = write_document(tmp_path / "report.txt", 200)
    _attach_in_a_new_chat(app, report)
    _read(app, 1)
    first = app.controller.conversation

    _attach_in_a_new_chat(app, report)
    choice = _choice(app)
    assert "report.txt" in choice.text() and first.title in choice.text()
    app.qtbot.mouseClick(choice.open_it, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: app.controller.conversation is not None
                        and app.controller.conversation.id == first.id, timeout=30_000)
    assert not app.window.documents.busy and app.controller.conversations.rowCount() == 1, "nothing read again"

    _attach_in_a_new_chat(app, report)
    app.qtbot.mouseClick(_choice(app).again, Qt.MouseButton.LeftButton)
    _read(app, 2)
    titles = sorted(c.title for c in stored(app, lambda s: s.list()))
    assert titles == ["report.txt", "report.txt (2)"], "two conversations from one file read apart"

    _attach_in_a_new_chat(app, report)
    _choice(app).reject()  # Cancel: nothing added
    app.qtbot.waitUntil(lambda: not app.window.documents.busy, timeout=30_000)
    assert "was not added" in app.window.status_line.text()
    assert len(stored(app, lambda s: s.list())) == 2
