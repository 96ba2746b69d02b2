"""A document longer than the model was trained on, in the window on the scripted engine (issue 31,
point 7): the dialog says the trained length is the limit, not memory, and offers the catalogue model
that reads it whole here; one click opens the Models page on that file and starts its download."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.documents import write_document


@pytest.fixture
def engine() -> ScriptedEngine:
    engine = ScriptedEngine(document_budget_tokens=3000, grown_budget_tokens=0)
    engine.n_ctx_train = engine.n_ctx  # it has all it was trained on already: only another model helps
    return engine


def test_the_model_that_reads_it_whole_is_one_click_away(start_scripted, engine, tmp_path):
    app = start_scripted()
    downloads: list[str] = []
    app.window.models.download = downloads.append  # the Models page's download, without the network
    assert app.documents.attach(write_document(tmp_path / "long.txt", 5000))
    app.wait(lambda: app.documents.part_choice is not None and app.documents.part_choice.isVisible())
    choice = app.documents.part_choice

    assert "SmolLM2 135M Instruct was trained on 4,096 tokens at most (the model's limit, not the memory's)" \
        in choice.text()
    assert "free some memory" not in choice.text() and "LFM2 350M reads it whole on this machine" in choice.text()
    assert choice.get_model.text() == "Download LFM2 350M (218.7 MiB)" and choice.get_model.isDefault()
    assert choice.first is not None and choice.last is not None, "its parts are still offered"

    app.qtbot.mouseClick(choice.get_model, Qt.MouseButton.LeftButton)
    app.wait(lambda: app.window.models_dialog is not None and app.window.models_dialog.isVisible())
    dialog = app.window.models_dialog
    app.wait(lambda: downloads == ["lfm2-350m:Q4_K_M"])
    assert dialog.selected_ref() == "lfm2-350m:Q4_K_M" and "lfm2-350m:Q4_K_M" in dialog.rows
