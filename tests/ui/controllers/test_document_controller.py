"""DocumentController on the scripted engine: a cancelled read leaves the conversation as it was (or
no conversation at all), and a document read to the end is a message with nothing to regenerate."""

from __future__ import annotations

from engine import protocol as p
from model_store.documents import DocumentStore
from tests.fakes.engine_client import hold
from tests.helpers.documents import write_document
from tests.helpers.gui import stored


def cancel_at_first_progress(app) -> None:
    app.documents.progress.connect(lambda *_: app.documents.cancel())


def test_a_cancelled_read_leaves_the_conversation_as_it_was(start_scripted, engine, tmp_path):
    app = start_scripted()
    earlier = app.send_and_wait("Hello there.")
    conversation_id = earlier.conversation_id
    shown_before = app.transcript()
    branch_before = stored(app, lambda s: s.current_branch(conversation_id))

    engine.script(p.ReadDocument, hold())
    cancel_at_first_progress(app)
    assert app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    app.wait(lambda: "was cancelled" in app.window.status_line.text())

    (read,) = engine.sent(p.ReadDocument)
    assert [c.request_id for c in engine.sent(p.Cancel)] == [read.request_id]
    assert read.conversation_id == conversation_id and read.messages[-1].content.startswith("Document: notes.txt")
    assert not app.documents.busy and app.controller.conversation.id == conversation_id
    assert app.transcript() == shown_before and not any(row.document for row in app.controller.messages.rows())
    assert stored(app, lambda s: s.current_branch(conversation_id)) == branch_before
    assert stored(app, lambda s: DocumentStore(s.db).for_conversation(conversation_id)) == []
    after = app.send_and_wait("Still there?")
    assert after.user.parent_id == earlier.answer.id, "the next question follows the earlier answer, not the document"


def test_a_cancelled_read_into_a_new_chat_leaves_no_conversation(start_scripted, engine, tmp_path):
    app = start_scripted()
    engine.script(p.ReadDocument, hold())
    cancel_at_first_progress(app)
    assert app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    app.wait(lambda: "was cancelled" in app.window.status_line.text())

    assert app.controller.conversation is None and app.transcript() == []
    assert stored(app, lambda s: s.list()) == []


def test_a_document_read_to_the_end_is_kept_and_offers_no_regenerate(start_scripted, engine, tmp_path):
    app = start_scripted()
    assert app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    app.wait(lambda: app.window.status_line.text().startswith("Read notes.txt"))

    (row,) = app.controller.messages.rows()
    assert row.document is not None and row.document.title == "notes.txt" and row.document.tokens > 0
    assert app.controller.answer_to_regenerate() is None and not app.window.regenerate_action.isEnabled()
    assert not app.controller.regenerate() and engine.sent(p.ANSWERS) == []
