"""Documents in the window: attach, watch it being read, cancel, attach again, ask, new chat from it."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt

from model_store.documents import DocumentStore
from app.services.extract import READ_CHUNK_BYTES, DocumentError
from tests.helpers.documents import write_document
from tests.helpers.gui import stored, watch_notices, write_settings


def test_attach_progress_cancel_attach_again_and_ask(start_app, hybrid_tiny, tmp_path):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=12, draft="off")
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    long_doc = write_document(tmp_path / "long.txt", 1600)
    seen: list[tuple[int, int]] = []

    def cancel_at_first_progress(done, total, rate, eta):
        seen.append((done, total))
        if len(seen) == 1:
            app.qtbot.mouseClick(window.document_progress.cancel, Qt.MouseButton.LeftButton)

    documents.progress.connect(cancel_at_first_progress)
    assert documents.attach(long_doc)
    app.qtbot.waitUntil(lambda: "was cancelled" in window.status_line.text(), timeout=60_000)
    documents.progress.disconnect(cancel_at_first_progress)
    assert seen and seen[0][0] < seen[0][1], "the bar moved, then the reading stopped before the end"
    assert not window.document_progress.isVisible() and not documents.busy
    assert app.controller.conversation is None and app.transcript() == [] and window.chat_view.widgets == [], \
        "the conversation made for the cancelled document is gone"
    assert stored(app, lambda s: s.list()) == []

    short_doc = write_document(tmp_path / "notes.txt", 500)
    progress: list[int] = []
    documents.progress.connect(lambda done, total, rate, eta: progress.append(done))
    assert documents.attach(short_doc)
    app.qtbot.waitUntil(lambda: window.status_line.text().startswith("Read notes.txt"), timeout=60_000)
    assert progress and progress == sorted(progress)
    rows = app.controller.messages.rows()
    chip = window.chat_view.widgets[-1]
    assert rows[-1].document is not None and rows[-1].document.title == "notes.txt"
    assert chip.who.text().startswith("Document: notes.txt") and f"{rows[-1].document.tokens:,} tokens" in chip.who.text()

    first = app.send_and_wait("Which word comes first?")
    second = app.send_and_wait("And which comes last?")
    assert first.finished.snapshot.restored and first.finished.snapshot.prefilled_tokens < 40
    assert second.finished.snapshot.restored and second.finished.snapshot.prefilled_tokens < 40
    assert [r.message.role for r in app.controller.messages.rows()][-4:] == ["user", "assistant", "user", "assistant"]


def test_cancelling_a_read_leaves_the_conversation_as_it_was(start_app, hybrid_tiny, tmp_path):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=8, draft="off")
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    earlier = app.send_and_wait("Hello there.")
    conversation_id = app.controller.conversation.id
    shown_before = app.transcript()
    branch_before = stored(app, lambda s: s.current_branch(conversation_id))

    documents.progress.connect(
        lambda *_: app.qtbot.mouseClick(window.document_progress.cancel, Qt.MouseButton.LeftButton))
    assert documents.attach(write_document(tmp_path / "long.txt", 1600))
    app.qtbot.waitUntil(lambda: "was cancelled" in window.status_line.text(), timeout=60_000)

    assert app.controller.conversation.id == conversation_id and app.transcript() == shown_before
    assert not any(row.document for row in app.controller.messages.rows())
    assert not any(widget.who.text().startswith("Document:") for widget in window.chat_view.widgets), "no chip"
    assert stored(app, lambda s: s.current_branch(conversation_id)) == branch_before
    assert stored(app, lambda s: DocumentStore(s.db).for_conversation(conversation_id)) == []
    answer = app.send_and_wait("Still there?")
    assert answer.user.parent_id == earlier.answer.id, "the next question follows the earlier answer, not the document"
    assert answer.finished.snapshot.restored and answer.finished.snapshot.prefilled_tokens < 40


def test_cancel_while_extracting_stops_the_extraction_and_adds_nothing(start_app, tiny_settings, tmp_path,
                                                                       monkeypatch):
    import ui.document_controller

    real_extract_text = ui.document_controller.extract_text
    chunks_read: list[int] = []
    outcome: list[str] = []

    def watched_extract_text(path, **options):  # the real extraction, watched: how far it got, how it ended
        try:
            document = real_extract_text(path, on_progress=lambda done, total: chunks_read.append(done), **options)
        except DocumentError as error:
            outcome.append(str(error))
            raise
        outcome.append("finished")
        return document

    monkeypatch.setattr(ui.document_controller, "extract_text", watched_extract_text)
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    big = tmp_path / "big.txt"
    big.write_bytes(b"a line of plain text to extract\n" * (24 * READ_CHUNK_BYTES // 32))  # 24 chunks
    assert documents.attach(big) and window.document_progress.isVisible()
    app.qtbot.mouseClick(window.document_progress.cancel, Qt.MouseButton.LeftButton)

    assert not documents.busy and not window.document_progress.isVisible(), "Cancel ends the load at once"
    assert "Loading big.txt was cancelled" in window.status_line.text()
    app.qtbot.waitUntil(lambda: bool(outcome) and documents.background.running == 0, timeout=30_000)
    assert outcome == ["Reading big.txt was cancelled."] and len(chunks_read) < 24, "the extraction stopped early"
    assert "Loading big.txt was cancelled" in window.status_line.text() and "big.txt" not in window.banner.text()
    assert app.controller.conversation is None and stored(app, lambda s: s.list()) == []

    assert documents.attach(write_document(tmp_path / "notes.txt", 200)), "a new attach can start at once"
    app.qtbot.waitUntil(lambda: window.status_line.text().startswith("Read notes.txt"), timeout=60_000)


def test_a_document_too_long_for_the_context_offers_its_first_or_last_part(start_app, tiny_settings, tmp_path):
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    long_doc = write_document(tmp_path / "long.txt", 6000)
    assert documents.attach(long_doc)
    app.qtbot.waitUntil(lambda: documents.part_choice is not None and documents.part_choice.isVisible(),
                        timeout=60_000)
    choice = documents.part_choice
    tokens, budget, over = (int(n.replace(",", "")) for n in re.search(
        r"has ([\d,]+) tokens but this model's context leaves room for ([\d,]+) \(([\d,]+) too many\)",
        choice.text()).groups())
    assert tokens - budget == over > 0 and "longer context" in choice.text()
    assert choice.first.isVisible() and choice.last.isVisible()
    assert not documents.busy and app.controller.conversation is None, "nothing is stored before a choice"

    app.qtbot.mouseClick(choice.last, Qt.MouseButton.LeftButton)
    app.qtbot.waitUntil(lambda: window.status_line.text().startswith("Read long.txt"), timeout=120_000)
    assert documents.part_choice is None
    document = app.controller.messages.rows()[-1].document
    read = int(re.search(r"Read long.txt: ([\d,]+) tokens", window.status_line.text()).group(1).replace(",", ""))
    assert document.part == "last" and document.tokens == read, "the card counts the tokens read"
    # the budget is the room the conversation left (context less room for questions, less what precedes the
    # document); the part is cut to it less its heading line, and the read counts what precedes it and the markers
    assert abs(read - budget) < 64, "the part that fits, as measured on the rendered conversation"
    text = long_doc.read_text(encoding="utf-8")
    assert app.controller.messages.rows()[-1].message.content.endswith(text[-200:]), "the last part was kept"
    answer = app.send_and_wait("What is the last word?")
    assert answer.finished.finish_reason in ("stop", "length") and answer.finished.snapshot.restored


def test_new_chat_from_a_document_starts_from_its_saved_state(start_app, hybrid_tiny, tmp_path):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=12, draft="off")
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    assert documents.attach(write_document(tmp_path / "report.md", 400))
    app.qtbot.waitUntil(lambda: window.status_line.text().startswith("Read report.md"), timeout=60_000)
    original = app.controller.conversation.id
    chip = window.chat_view.widgets[0]
    assert chip.new_chat.isVisible()
    app.qtbot.mouseClick(chip.new_chat, Qt.MouseButton.LeftButton)
    # "New chat from report.md: it starts from the document's saved state.", then, once the engine
    # restored that state (milliseconds later, so a poll may miss the first), "Resumed from snapshot".
    app.qtbot.waitUntil(lambda: app.controller.conversation is not None and app.controller.conversation.id != original
                        and ("saved state" in window.status_line.text()
                             or window.status_line.text().startswith("Resumed from snapshot")), timeout=30_000)
    answer = app.send_and_wait("Summarise it.")
    assert answer.finished.snapshot.restored and answer.finished.snapshot.prefilled_tokens < 40, \
        "the new chat did not read the document again"


def test_a_binary_file_is_refused_with_a_reason(start_app, tiny_settings, tmp_path):
    app = start_app()
    app.wait_loaded()
    binary = tmp_path / "photo.dat"
    binary.write_bytes(bytes(range(256)) * 64)
    assert app.window.documents.attach(binary)
    app.qtbot.waitUntil(lambda: "photo.dat" in app.window.banner.text(), timeout=30_000)
    assert app.window.banner.kind == "error" and not app.window.documents.busy


def test_a_file_dropped_on_the_chat_is_read_as_a_document(start_app, tiny_settings, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    app = start_app()
    app.wait_loaded()
    dropped = write_document(tmp_path / "dropped.md", 200)
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(dropped))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    app.window.chat_view.dropEvent(event)
    app.qtbot.waitUntil(lambda: app.window.status_line.text().startswith("Read dropped.md"), timeout=60_000)
    assert app.controller.messages.rows()[-1].document.title == "dropped.md"


def test_a_read_that_meets_an_internal_error_ends_says_so_and_leaves_the_app_answering(start_app, hybrid_tiny, tmp_path,
                                                                                       monkeypatch):
    """The worker's bug (injected: HEARTH_TEST_INTERNAL_ERROR) ends the read with its DocumentRead: the window
    is not left reading for ever, says what happened, takes the document back out, and answers next."""
    monkeypatch.setenv("HEARTH_TEST_INTERNAL_ERROR", "read_document")
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=8, draft="off")
    app = start_app()
    app.wait_loaded()
    documents, window = app.window.documents, app.window
    notices = watch_notices(app)
    assert documents.attach(write_document(tmp_path / "notes.txt", 300))
    app.qtbot.waitUntil(lambda: "did not finish" in window.status_line.text(), timeout=60_000)
    assert not documents.busy and not window.document_progress.isVisible()
    assert any(kind == "error" and "internal error" in text for kind, text in notices), notices
    assert not any(row.document for row in app.controller.messages.rows())
    assert app.send_and_wait("Still there?").finished.finish_reason in ("stop", "length")
