"""Settings → Model has the repeat penalty's window (``repeat_last_n``) as a row like the other sampling
values, with where its value comes from (issue 51, point 1). Real offscreen dialog, a real GGUF file
carrying ``general.sampling.penalty_last_n``."""

from __future__ import annotations

import shiboken6
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QSpinBox

from app.services.settings import Settings
from tests.ui.test_settings_sampling_sources import open_dialog, source
from tests.unit.test_sampling_defaults import write_model


def press_ok(dialog) -> Settings:
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    return dialog.result_settings


def test_the_window_row_shows_the_models_value_and_saves_the_users(qtbot, tmp_path):
    model = write_model(tmp_path / "windowed.gguf", "llama", {"penalty_last_n": 256})
    dialog = open_dialog(qtbot, Settings(model=str(model)), model_path=str(model))
    try:
        window = dialog.findChild(QSpinBox, "repeat_last_n")
        assert (window.value(), source(dialog, "repeat_last_n")) == (256, "from the model")
        window.setValue(-1)  # the lowest value: the whole answer
        assert window.text() == "Whole answer" and source(dialog, "repeat_last_n") == "yours"
        assert "256" in dialog.findChild(QLabel, "source_repeat_last_n").toolTip()  # what the model would use
        assert press_ok(dialog).repeat_last_n == -1
    finally:
        shiboken6.delete(dialog)


def test_a_window_nobody_set_is_hearths_and_follows_the_model(qtbot):
    dialog = open_dialog(qtbot, Settings())
    try:
        window = dialog.findChild(QSpinBox, "repeat_last_n")
        assert (window.value(), source(dialog, "repeat_last_n")) == (64, "Hearth's default")
        assert "0 switches it off" in window.toolTip()
        assert press_ok(dialog).repeat_last_n is None
    finally:
        shiboken6.delete(dialog)


def test_a_users_window_is_shown_as_theirs(qtbot):
    dialog = open_dialog(qtbot, Settings(repeat_last_n=0))
    try:
        window = dialog.findChild(QSpinBox, "repeat_last_n")
        assert (window.value(), source(dialog, "repeat_last_n")) == (0, "yours")
        assert press_ok(dialog).repeat_last_n == 0
    finally:
        shiboken6.delete(dialog)
