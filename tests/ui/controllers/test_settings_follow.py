"""The window samples with the model's own defaults where the user set none (issue 51, point 1), and
takes settings another program writes to settings.json without a restart, never overwriting an open
Settings dialog in silence (point 5). The real window and store on the scripted engine client
(tests/ui/controllers/conftest.py); real settings files."""

from __future__ import annotations

import msgspec
import pytest
from PySide6.QtWidgets import QDialogButtonBox, QDoubleSpinBox

from app.services.paths import user_paths
from app.services.settings import Settings, load_settings, save_settings
from engine import protocol as p
from tests.fakes.engine_client import answer
from tests.helpers.gui import write_settings
from tests.unit.test_sampling_defaults import write_model
from ui.window_dialogs import OUTSIDE_NOTICE


def saved_elsewhere(**changes) -> Settings:
    """What another program (`hearth devices calibrate`, an editor) saves while the window runs."""
    config = user_paths().config
    new = msgspec.structs.replace(load_settings(config).settings, **changes)
    save_settings(new, config, npu_available=True)
    return new


def test_an_answer_samples_with_the_models_own_values_where_the_user_set_none(start_scripted, engine, tmp_path):
    model = write_model(tmp_path / "mine.gguf", "llama", {"temp": 0.3, "top_k": 12, "penalty_repeat": 1.25})
    write_settings(model=str(model), top_p=0.5)
    engine.script(p.AnswerTurn, answer("Hi."))
    app = start_scripted()
    app.send_and_wait("Hello")
    sampling = engine.sent(p.AnswerTurn)[0].sampling
    assert (sampling.top_k, sampling.top_p) == (12, 0.5)  # the model's; the user's
    assert sampling.temperature == pytest.approx(0.3) and sampling.repeat_penalty == pytest.approx(1.25)


def test_settings_saved_by_another_program_are_used_without_a_restart(start_scripted, engine):
    engine.script(p.AnswerTurn, answer("Hi."))
    app = start_scripted()
    app.wait_idle_store()
    saved_elsewhere(temperature=0.2, highlight_drafts=True)
    app.qtbot.waitUntil(lambda: app.controller.settings.temperature == 0.2, timeout=15_000)
    assert app.window.highlight_action.isChecked()
    assert app.window.banner.text() == OUTSIDE_NOTICE
    app.send_and_wait("Hello")
    assert engine.sent(p.AnswerTurn)[0].sampling.temperature == 0.2


def test_an_open_settings_dialog_says_so_and_keeps_what_the_user_typed(start_scripted, engine):
    app = start_scripted()
    app.wait_idle_store()
    app.window.open_settings()
    dialog = app.window.settings_dialog
    dialog.findChild(QDoubleSpinBox, "min_p").setValue(0.2)
    saved_elsewhere(temperature=0.4, telemetry_open=True)
    app.qtbot.waitUntil(lambda: dialog.outside_note.isVisible(), timeout=15_000)
    assert app.controller.settings.temperature == 0.4
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    kept = load_settings(user_paths().config).settings
    assert kept.min_p == 0.2 and kept.telemetry_open  # the user's edit, and a field only the other program set
