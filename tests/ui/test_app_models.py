"""The Models page in the real app: download from the local hub with a moving bar, cancel, resume,
then the model is in the picker and loads; import a local file; delete."""

from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import Qt

from tests.fixtures.hub_catalogue import MODEL_ID, write_hub_catalogue

pytest_plugins = ["tests.store.conftest_hub"]

REF = f"{MODEL_ID}:Q8_0"
FILENAME = "tiny-Q8_0.gguf"


@pytest.fixture
def models_page(start_app, hub, monkeypatch, tmp_path, tiny_gguf_bytes, tiny_settings, qtbot):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HEARTH_CATALOGUE", str(write_hub_catalogue(hub, tmp_path, {"Q8_0": tiny_gguf_bytes})))
    app = start_app()
    app.window.open_models()
    dialog = app.window.models_dialog
    qtbot.waitUntil(lambda: dialog.card_of(REF) is not None, timeout=30_000)
    return app, dialog


def picker_labels(window) -> list[str]:
    combo = window.model_picker.combo
    return [combo.itemText(i) for i in range(combo.count())]


def test_download_moves_the_bar_cancels_resumes_and_lands_in_the_picker(models_page, hub, qtbot,
                                                                         tiny_gguf_bytes):
    app, dialog = models_page
    hub.throttle(200_000)  # about 6 s for the whole file: time to see the bar move and cancel
    card = dialog.card_of(REF)
    assert dialog.select_ref(REF) and card.download.isEnabled() and card.download.text() == "Download"
    qtbot.mouseClick(card.download, Qt.MouseButton.LeftButton)
    row = dialog.rows[REF]
    assert not card.download.isEnabled() and card.download.text() == "Downloading…"
    qtbot.waitUntil(lambda: row.isVisibleTo(card), timeout=5_000)  # the bar is on the card
    qtbot.waitUntil(lambda: row.bar.value() >= 150, timeout=30_000)  # 15 % and moving
    assert "/s" in row.bar.format()
    qtbot.mouseClick(row.cancel, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: REF not in dialog.rows, timeout=30_000)
    assert "paused" in dialog.status.text()
    assert card.status() == "" and card.download.isEnabled()
    hub.throttle(None)
    qtbot.mouseClick(card.download, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: card.status() == "installed", timeout=60_000)
    first, second = hub.body_gets(FILENAME)
    assert second.range and not second.range.startswith("bytes=0-")  # the second transfer resumed
    assert first.body_bytes + second.body_bytes < 2 * len(tiny_gguf_bytes)
    qtbot.waitUntil(lambda: any("Hearth Tiny Q8_0" in label for label in picker_labels(app.window)), timeout=30_000)
    assert dialog.installed.count() == 2, "the embedded model and the download"


def test_a_failed_download_says_why(models_page, hub, qtbot):
    _, dialog = models_page
    hub.corrupt(FILENAME)
    card = dialog.card_of(REF)
    qtbot.mouseClick(card.download, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Could not download" in dialog.status.text(), timeout=60_000)
    assert "sha256" in dialog.status.text().lower() or "checksum" in dialog.status.text().lower()
    assert card.status() == "" and REF not in dialog.rows


def test_import_then_delete_updates_the_list_and_the_picker(models_page, qtbot, hybrid_tiny, tmp_path):
    app, dialog = models_page
    path = tmp_path / "Imported Tiny.gguf"
    shutil.copy(hybrid_tiny, path)
    dialog.manager.import_file(str(path))
    qtbot.waitUntil(lambda: dialog.installed.count() == 2, timeout=60_000)  # the embedded model, and the import
    assert any(str(path) == app.window.model_picker.combo.itemData(i)
               for i in range(app.window.model_picker.combo.count()))
    dialog.installed.setCurrentRow(1)
    qtbot.mouseClick(dialog.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.installed.count() == 1, timeout=60_000)
    assert path.exists()  # an imported file is the user's own: only unregistered
