"""The Models page's context, in the window on the scripted engine, on a machine pinned to 8 GiB
available: each quantization's context here, the trained maximum and a transformer's, and the chart
of the one selected; on a machine pinned to 64 GiB, the trained length is the limit and what memory
would hold more is said as headroom (issue 30)."""

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
    assert dialog.variant_item(REF).text(CONTEXT_COLUMN) == f"{hybrid:,} of 262,144 trained · transformer: {transformer:,}"
    assert transformer < hybrid < entry.context_length, "at 4 GiB the memory, not the training, is the limit"
    assert f"an automatic context gets {hybrid:,}." in dialog.variant_item(REF).toolTip(CONTEXT_COLUMN)
    assert "headroom" not in dialog.variant_item(REF).toolTip(CONTEXT_COLUMN)
    assert "fill 50 %" in dialog.memory.text()
    assert dialog.chart.model is None, "nothing is selected yet"

    assert dialog.select_ref(REF)
    model = dialog.chart.model
    assert model is not None and model.name == entry.name
    assert model.crossings() == model.usable() == {"hybrid": hybrid, "transformer": transformer}
    assert model.available_bytes == AVAILABLE and model.budget_bytes == AVAILABLE // 2
    assert f"{hybrid:,} tokens" in dialog.chart.accessibleDescription()
    dialog.catalogue.clearSelection()
    assert dialog.chart.model is None


def test_where_memory_would_hold_more_than_trained_the_trained_length_is_the_context_and_the_rest_headroom(
        start_scripted, monkeypatch):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(64 * 1024**3))
    app = start_scripted()
    dialog = open_models(app)
    entry, file = app_catalogue(app.window.models.cache_dir).resolve(REF)
    hybrid, transformer = headroom(entry, file.size_bytes, 64 * 1024**3)
    assert hybrid > transformer > entry.context_length == 262_144, "at 64 GiB memory would hold more than trained"
    item = dialog.variant_item(REF)
    assert item.text(CONTEXT_COLUMN) == f"262,144 (trained max; memory: {hybrid:,}) · transformer: 262,144"
    tip = item.toolTip(CONTEXT_COLUMN)
    assert f"would hold {hybrid:,}" in tip and "an automatic context gets 262,144;" in tip and "headroom" in tip
    assert f"transformer of equal size would get 262,144 tokens, its trained maximum (memory would hold " \
           f"{transformer:,})" in tip
    assert dialog.select_ref(REF)
    model = dialog.chart.model
    assert model.usable() == {"hybrid": 262_144, "transformer": 262_144}
    assert model.crossings() == {"hybrid": hybrid, "transformer": transformer}
    description = dialog.chart.accessibleDescription()
    assert f"can use 262,144 tokens, its trained maximum (memory would hold {hybrid:,})" in description
    assert f"use {hybrid:,}" not in description
