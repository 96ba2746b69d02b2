"""The Models page's context, in the window on the scripted engine, on a machine pinned to 8 GiB
available: each quantization's context here, the trained maximum and a transformer's, and the chart
of the one selected; on a machine pinned to 64 GiB, the trained length is the limit and what memory
would hold more is said as headroom (issue 30)."""

from __future__ import annotations

import pytest

from app.services.model_refs import app_catalogue
from model_store.fit import AVAILABLE_MEMORY_ENV, headroom
from tests.helpers.gui import write_settings
from ui.model_words import words_at_once

AVAILABLE = 8 * 1024**3
REF = "qwen3.5-2b:Q4_K_M"


@pytest.fixture(autouse=True)
def small_machine(monkeypatch):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(AVAILABLE))


def open_models(app):
    app.window.open_models()
    dialog = app.window.models_dialog
    app.wait(lambda: dialog.card_of(REF) is not None)
    assert dialog.select_ref(REF)
    return dialog


def test_each_quantization_shows_its_context_here_and_the_selected_one_is_charted(start_scripted):
    write_settings(memory_budget_percent=50)
    app = start_scripted()
    dialog = open_models(app)
    entry, file = app_catalogue(app.window.models.cache_dir).resolve(REF)
    hybrid, transformer = headroom(entry, file.size_bytes, AVAILABLE, 50)
    card = dialog.card_of(REF)
    assert transformer < hybrid < entry.context_length, "at 4 GiB the memory, not the training, is the limit"
    assert card.reads.text() == words_at_once(hybrid) and card.reads.text().startswith("Reads about ")
    tip = card.reads.toolTip()
    assert tip.startswith(f"{hybrid:,} tokens of context") and f"would read {transformer:,} here" in tip
    assert "more than it can use" not in tip
    assert "up to 50 %" in dialog.memory.text()
    assert card.chart is None, "the chart is one click away, not drawn yet"

    card.details_button.click()
    model = card.chart.model
    assert model is not None and model.name == entry.name
    assert model.crossings() == model.usable() == {"hybrid": hybrid, "transformer": transformer}
    assert model.available_bytes == AVAILABLE and model.budget_bytes == AVAILABLE // 2
    assert f"{hybrid:,} tokens" in card.chart.accessibleDescription() and card.details.isVisibleTo(card)
    card.details_button.click()
    assert not card.details.isVisible()


def test_where_memory_would_hold_more_than_trained_the_trained_length_is_the_context_and_the_rest_headroom(
        start_scripted, monkeypatch):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(64 * 1024**3))
    app = start_scripted()
    dialog = open_models(app)
    entry, file = app_catalogue(app.window.models.cache_dir).resolve(REF)
    hybrid, transformer = headroom(entry, file.size_bytes, 64 * 1024**3)
    assert hybrid > transformer > entry.context_length == 262_144, "at 64 GiB memory would hold more than trained"
    card = dialog.card_of(REF)
    assert card.reads.text() == "Reads about 200,000 words at once", "262,144 tokens, the trained length"
    tip = card.reads.toolTip()
    assert tip.startswith("262,144 tokens of context") and f"would hold {hybrid:,}, more than it can use" in tip
    card.show_details(True)
    model = card.chart.model
    assert model.usable() == {"hybrid": 262_144, "transformer": 262_144}
    assert model.crossings() == {"hybrid": hybrid, "transformer": transformer}
    description = card.chart.accessibleDescription()
    assert f"can use 262,144 tokens, its trained maximum (memory would hold {hybrid:,})" in description
    assert f"use {hybrid:,}" not in description
