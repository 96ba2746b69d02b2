"""Settings → Model has the phrase penalty (``dry_multiplier``, :mod:`engine.decoding.sequence_penalty`) as a row
like the other sampling values, with where its value comes from. Real offscreen dialog."""

from __future__ import annotations

from PySide6.QtWidgets import QDoubleSpinBox, QPushButton

from app.services.settings import Settings
from tests.ui.test_settings_repeat_window import press_ok
from tests.ui.test_settings_sampling_sources import dialog_of, source


def test_a_penalty_nobody_set_is_hearths_and_a_changed_one_is_saved_as_the_users(qtbot):
    with dialog_of(qtbot, Settings()) as dialog:
        box = dialog.findChild(QDoubleSpinBox, "dry_multiplier")
        assert (box.value(), source(dialog, "dry_multiplier")) == (0.8, "Hearth's default")
        assert "0 is off" in box.toolTip() and "dry_multiplier" in box.toolTip()
        box.setValue(0.0)
        assert source(dialog, "dry_multiplier") == "yours"
        assert press_ok(dialog).dry_multiplier == 0.0


def test_a_users_penalty_is_shown_as_theirs_and_the_reset_gives_it_back_to_the_model(qtbot):
    with dialog_of(qtbot, Settings(dry_multiplier=2.0)) as dialog:
        box = dialog.findChild(QDoubleSpinBox, "dry_multiplier")
        assert (box.value(), source(dialog, "dry_multiplier")) == (2.0, "yours")
        dialog.findChild(QPushButton, "use_model_sampling").click()
        assert (box.value(), source(dialog, "dry_multiplier")) == (0.8, "Hearth's default")
        assert press_ok(dialog).dry_multiplier is None
