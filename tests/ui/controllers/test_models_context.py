"""The Models page's context headroom, in the window on the scripted engine, on a machine pinned to
8 GiB available: each quantization's context here, the trained maximum and a transformer's, and the
chart of the one selected."""

from __future__ import annotations

import pytest

from app.services.model_refs import app_catalogue
from model_store.fit import AVAILABLE_MEMORY_ENV, headroom
from tests.helpers.gui import write_settings
from ui.views.models_dialog import CONTEXT_COLUMN

AVAILABLE = 8 * 1024**3
REF = "qwen3.5-2b:Q4_K_M"


@pytest.fixture(autouse=True)
def small_machine(monkeypatch):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(AVAILABLE))


def open_models(app):
    app.window.open_models()
    dialog = app.window.models_dialog
    app.wait(lambda: dialog.variant_item(REF) is not None)
    return dialog


def test_each_quantization_shows_its_context_here_and_the_selected_one_is_charted(start_scripted):
    write_settings(memory_budget_percent=50)
    app = start_scripted()
    dialog = open_models(app)
    entry, file = app_catalogue(app.window.models.cache_dir).resolve(REF)
    hybrid, transformer = headroom(entry, file.size_bytes, AVAILABLE, 50)
    assert dialog.variant_item(REF).text(CONTEXT_COLUMN) == f"{hybrid:,} (262,144; {transformer:,})"
    assert transformer < hybrid < entry.context_length, "at 4 GiB the memory, not the training, is the limit"
    assert f"an automatic context gets {hybrid:,}" in dialog.variant_item(REF).toolTip(CONTEXT_COLUMN)
    assert "fill 50 %" in dialog.memory.text()
    assert dialog.chart.model is None, "nothing is selected yet"

    assert dialog.select_ref(REF)
    model = dialog.chart.model
    assert model is not None and model.name == entry.name
    assert model.crossings() == {"hybrid": hybrid, "transformer": transformer}
    assert model.available_bytes == AVAILABLE and model.budget_bytes == AVAILABLE // 2
    assert f"{hybrid:,} tokens" in dialog.chart.accessibleDescription()
    dialog.catalogue.clearSelection()
    assert dialog.chart.model is None
