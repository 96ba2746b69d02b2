"""Settings opened and closed many times in one window: each closed dialog is gone (not kept hidden
under the window), and a theme or text-size change after many opens re-styles the window safely."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDialogButtonBox

from ui.views.settings_dialog import SettingsDialog


def choose(dialog, name: str, value) -> None:
    combo = dialog.findChild(QComboBox, name)
    combo.setCurrentIndex(combo.findData(value))


def test_closed_settings_dialogs_are_gone_and_theme_changes_stay_safe(start_scripted, appearance):
    app = start_scripted()
    for round_, (theme, size) in enumerate([("dark", 130), ("light", 150), ("dark", 100), ("system", 130)] * 3):
        app.window.open_settings()
        dialog = app.window.settings_dialog
        choose(dialog, "theme", theme)
        choose(dialog, "text_size", size)
        button = QDialogButtonBox.StandardButton.Ok if round_ % 3 else QDialogButtonBox.StandardButton.Cancel
        dialog.findChild(QDialogButtonBox).button(button).click()
        app.wait(lambda: len(app.window.findChildren(SettingsDialog)) == 0)
    assert app.controller.settings.theme == "system" and app.controller.settings.text_size == 130
