"""Help → About Hearth, and the welcome's data folder: the window on the scripted engine."""

from __future__ import annotations

import importlib.metadata
import sys
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt

from app.surfaces.gui import app_parts
from app.services.about import app_version
from app.services.paths import user_paths
from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.gui import write_settings
from ui.app import build_window
from ui.views import about_dialog
from ui.views.about_dialog import AboutDialog, third_party_licences


@pytest.fixture
def window(qtbot):
    built = build_window(replace(app_parts(), make_client=ScriptedEngine))
    qtbot.addWidget(built)
    built.show()
    return built


def help_action(window, text: str):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    return next(a for a in menu.actions() if a.text() == text)


class OpenedUrls:
    """Stands in for QDesktopServices: records what would be opened."""

    def __init__(self, opens: bool) -> None:
        self.urls: list[str] = []
        self.opens = opens

    def openUrl(self, url) -> bool:  # noqa: N802 (Qt's name)
        self.urls.append(url.toLocalFile())
        return self.opens


def test_the_about_box_names_the_version_the_engine_and_the_data_folder(qtbot, tmp_path):
    dialog = AboutDialog(tmp_path / "data", licences=None)
    qtbot.addWidget(dialog)
    said = dialog.text()
    assert f"Hearth {app_version()}" in said and app_version() != "" and "unknown" not in app_version()
    assert f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}" in said
    assert "MIT" in said and str(tmp_path / "data") in said
    assert "installed with them" in said, "run from the packages, the licences are the packages' own"
    assert not hasattr(dialog, "licences_button")


def test_the_about_box_opens_the_bundled_licences(qtbot, tmp_path, monkeypatch):
    licences = tmp_path / "THIRD_PARTY_LICENSES"
    licences.write_text("licences")
    desktop = OpenedUrls(opens=True)
    monkeypatch.setattr(about_dialog, "QDesktopServices", desktop)
    dialog = AboutDialog(tmp_path, licences=licences)
    qtbot.addWidget(dialog)
    qtbot.mouseClick(dialog.licences_button, Qt.MouseButton.LeftButton)
    assert desktop.urls == [str(licences)]
    desktop.opens = False
    qtbot.mouseClick(dialog.licences_button, Qt.MouseButton.LeftButton)
    assert f"No program here opens {licences}" in dialog.text()


def test_the_licences_file_is_looked_for_beside_a_frozen_executable(tmp_path, monkeypatch):
    monkeypatch.delattr(sys, "frozen", raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "Hearth"))
    (tmp_path / "THIRD_PARTY_LICENSES").write_text("licences")
    assert third_party_licences() is None, "a development run has no bundled file"
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert third_party_licences() == tmp_path / "THIRD_PARTY_LICENSES"
    (tmp_path / "THIRD_PARTY_LICENSES").unlink()
    assert third_party_licences() is None


def test_help_about_opens_the_box_on_the_window_s_data_folder(window, qtbot, monkeypatch):
    frozen_here = window.data_folder.parent / "bundle"
    frozen_here.mkdir()
    (frozen_here / "THIRD_PARTY_LICENSES").write_text("licences")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(frozen_here / "Hearth"))
    assert window.data_folder == user_paths().data, "no folder chosen in the settings: the default one"

    help_action(window, "&About Hearth").trigger()
    dialog = window.findChild(AboutDialog)
    qtbot.waitUntil(dialog.isVisible, timeout=3_000)
    assert str(window.data_folder) in dialog.text() and f"Hearth {app_version()}" in dialog.text()
    assert dialog.licences == frozen_here / "THIRD_PARTY_LICENSES"
    dialog.reject()


def test_the_welcome_names_the_data_folder(window):
    said = window.chat_view.welcome.text()
    assert f"Your conversations are kept in Hearth's data folder, {window.data_folder}." in said


def test_a_data_folder_chosen_in_the_settings_is_the_one_named(qtbot, tmp_path):
    chosen = tmp_path / "my conversations"
    write_settings(data_folder=str(chosen))
    built = build_window(replace(app_parts(), make_client=ScriptedEngine))
    qtbot.addWidget(built)
    assert built.data_folder == chosen and str(chosen) in built.chat_view.welcome.text()
