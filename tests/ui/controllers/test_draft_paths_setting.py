"""Settings → Performance → Draft paths, on the scripted engine: the load carries the setting, and
changing it reloads the model with the new count (the worker sizes its sequences at load time)."""

from __future__ import annotations

from PySide6.QtWidgets import QDialogButtonBox, QSpinBox

from engine import protocol as p
from tests.helpers.gui import write_settings


def test_the_load_carries_the_settings_draft_paths(start_scripted, engine):
    write_settings(draft_paths=3)
    start_scripted()
    (load,) = engine.sent(p.LoadModel)
    assert load.draft_paths == 3


def test_changing_the_draft_paths_reloads_the_model_with_them(start_scripted, engine):
    app = start_scripted()
    assert engine.sent(p.LoadModel)[0].draft_paths == p.DEFAULTS.draft_paths
    app.window.open_settings()
    dialog = app.window.settings_dialog
    dialog.findChild(QSpinBox, "draft_paths").setValue(2)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    app.wait(lambda: len(engine.sent(p.LoadModel)) == 2 and app.controller.loaded is not None)
    assert engine.sent(p.LoadModel)[1].draft_paths == 2
    assert app.controller.settings.draft_paths == 2
