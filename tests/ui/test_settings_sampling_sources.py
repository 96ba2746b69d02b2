"""Settings → Model says where each sampling value comes from and can give them all back to the model
(issue 51, point 1); its context is said in plain words, the technical terms in a tooltip (point 4).
Real offscreen dialog, real GGUF files carrying general.sampling.* keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import shiboken6
from PySide6.QtWidgets import QDialogButtonBox, QDoubleSpinBox, QGroupBox, QLabel, QPushButton, QSpinBox

from app.services.settings import Settings
from engine.protocol import DEFAULTS
from tests.unit.test_sampling_defaults import write_model
from tests.ui.test_settings_dialog import REPORT
from ui.views.settings_dialog import SettingsDialog


def open_dialog(qtbot, settings: Settings, **kwargs) -> SettingsDialog:
    dialog = SettingsDialog(settings, **kwargs)  # deleted by each test's finally
    dialog.show()
    return dialog


@contextmanager
def dialog_of(qtbot, settings: Settings, **kwargs) -> Iterator[SettingsDialog]:
    """:func:`open_dialog`, deleted when the block ends."""
    dialog = open_dialog(qtbot, settings, **kwargs)
    try:
        yield dialog
    finally:
        shiboken6.delete(dialog)


def source(dialog, name: str) -> str:
    return dialog.findChild(QLabel, f"source_{name}").text()


def test_each_value_says_where_it_comes_from_and_the_reset_gives_them_back(qtbot, tmp_path):
    model = write_model(tmp_path / "mine.gguf", "llama", {"temp": 0.3, "top_k": 12})
    dialog = open_dialog(qtbot, Settings(model=str(model), temperature=0.9), model_path=str(model))
    try:
        temperature, top_k = dialog.findChild(QDoubleSpinBox, "temperature"), dialog.findChild(QSpinBox, "top_k")
        assert (temperature.value(), top_k.value()) == (0.9, 12)  # the user's, the model's
        assert [source(dialog, n) for n in ("temperature", "top_k", "top_p", "repeat_penalty")] == [
            "yours", "from the model", "Hearth's default", "Hearth's default"]
        assert "0.3" in dialog.findChild(QLabel, "source_temperature").toolTip()  # what the model would use

        top_k.setValue(20)  # the user changes one: it becomes theirs
        assert source(dialog, "top_k") == "yours"
        dialog.findChild(QPushButton, "use_model_sampling").click()
        assert (temperature.value(), top_k.value()) == (0.3, 12)
        assert source(dialog, "temperature") == "from the model" and source(dialog, "top_k") == "from the model"

        dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
        result = dialog.result_settings
        assert (result.temperature, result.top_k, result.top_p, result.repeat_penalty) == (None,) * 4
    finally:
        shiboken6.delete(dialog)


def test_values_nobody_set_are_saved_as_following_the_model(qtbot):
    dialog = open_dialog(qtbot, Settings())
    try:
        assert dialog.findChild(QDoubleSpinBox, "repeat_penalty").value() == DEFAULTS.sampling.repeat_penalty
        dialog.findChild(QDoubleSpinBox, "min_p").setValue(0.1)
        dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
        assert dialog.result_settings == Settings(min_p=0.1)  # only what the user changed
        assert dialog.result_settings.temperature is None  # the rest follows the model
    finally:
        shiboken6.delete(dialog)


def test_the_context_is_said_in_words_people_know(qtbot, tmp_path):
    model = write_model(tmp_path / "m.gguf", "llama", {})
    dialog = open_dialog(qtbot, Settings(), model_path=str(model), context=REPORT)
    try:
        details = dialog.findChild(QLabel, "context_details")
        assert "32,768 tokens" in details.text() and "at once" in details.text()
        for jargon in ("KV", "cache", "n_ctx", "attention"):
            assert jargon not in details.text()
        assert "KV cache" in details.toolTip() and "n_ctx" in details.toolTip()
        titles = [box.title() for box in dialog.findChildren(QGroupBox)]
        assert "How much this model can read at once" in titles
    finally:
        shiboken6.delete(dialog)
