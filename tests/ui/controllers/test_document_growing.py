"""A document longer than the context, on the scripted engine: when the memory holds a context long
enough for all of it, the choice offers reading all of it first; choosing that reads it whole while
the context grows. When even the longest context would not hold it, only its parts are offered."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from engine import protocol as p
from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.documents import write_document

BUDGET, GROWN_BUDGET = 3000, 10_000  # the document budget now, and once the context grew as far as memory allows


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(document_budget_tokens=BUDGET, grown_budget_tokens=GROWN_BUDGET)


def wait_choice(app):
    documents = app.documents
    app.wait(lambda: documents.part_choice is not None and documents.part_choice.isVisible())
    return documents.part_choice


def test_a_document_that_fits_once_the_context_grows_is_offered_whole_first(start_scripted, engine, tmp_path):
    app = start_scripted()
    notices: list[str] = []
    app.controller.notice.connect(lambda kind, text: notices.append(text))
    path = write_document(tmp_path / "long.txt", 5000)
    assert app.documents.attach(path)
    choice = wait_choice(app)

    assert choice.all.text() == "Read all of it (needs 5,002 tokens, fits in memory)"
    assert choice.all.y() < choice.first.y() < choice.last.y() and choice.all.isDefault()
    assert "has 5,002 tokens but this model's context leaves room for 3,000" in choice.text(), "its heading too"
    assert "as much of its beginning or its end as fits (2,972 tokens, the room less the document's title)" \
        in choice.text(), "less the heading: 'Document: long.txt', 20 bytes"
    (measured,) = engine.sent(p.ReadDocument)
    assert not measured.grow, "the engine measured it and read nothing"
    app.wait(lambda: app.controller.conversation is None and app.controller.conversations.rowCount() == 0)  # taken back

    app.qtbot.mouseClick(choice.all, Qt.MouseButton.LeftButton)
    app.wait(lambda: app.window.status_line.text().startswith("Read long.txt"))
    read = engine.sent(p.ReadDocument)[-1]
    assert read.grow
    assert read.messages[-1].content.endswith(path.read_text(encoding="utf-8")), "all of it was read"
    document = app.controller.messages.rows()[-1].document
    assert document.part == "all" and document.tokens == 5002, "its 5,000 words and the title's line, as read"
    assert [n for n in notices if "context grew" in n] == ["The context grew from 4,096 to 6,144 tokens to hold this "
                                                           "(the model now takes about 106.0 MiB)."]
    assert "6,144 tokens at once" in app.window.model_picker.state.text()
    assert app.documents.part_choice is None and not app.documents.busy


def test_a_document_within_the_context_is_read_without_a_question(start_scripted, engine, tmp_path):
    app = start_scripted()
    assert app.documents.attach(write_document(tmp_path / "short.txt", 2000))
    app.wait(lambda: app.window.status_line.text().startswith("Read short.txt"))
    assert app.documents.part_choice is None and len(engine.sent(p.ReadDocument)) == 1


def test_a_document_too_long_even_for_the_longest_context_gets_only_its_parts(start_scripted, engine, tmp_path):
    app = start_scripted()
    assert app.documents.attach(write_document(tmp_path / "huge.txt", 12_000))
    choice = wait_choice(app)

    assert choice.all is None
    assert "leaves room for 10,000 (2,002 too many), even in the longest context it can have now" in choice.text()
    assert "free some memory" in choice.text() and "as much of its beginning or its end as fits." in choice.text()
    assert "2,972" not in choice.text(), "one number: the room"
    app.qtbot.mouseClick(choice.first, Qt.MouseButton.LeftButton)
    app.wait(lambda: app.window.status_line.text().startswith("Read huge.txt"))
    document = app.controller.messages.rows()[-1].document
    assert document.part == "first" and document.tokens == 2972 + 2, "the part that fits and the title's line"
    assert "6,144" not in app.window.model_picker.state.text(), "a part that fits needs no longer context"


def test_when_the_trained_length_is_the_limit_only_another_model_is_suggested(start_scripted, engine, tmp_path):
    engine.n_ctx_train, engine.grown_budget_tokens = engine.n_ctx, 0  # the model already has all it was trained on
    app = start_scripted()
    assert app.documents.attach(write_document(tmp_path / "long.txt", 5000))
    choice = wait_choice(app)
    assert choice.all is None and "choose a model with a longer context" in choice.text()
    assert "free some memory" not in choice.text()
