"""Help → About Hearth: what Hearth is, its version and the engine's, its licence, where the data
lives, and the licences of the software it carries.

An installed Hearth (a frozen bundle) has ``THIRD_PARTY_LICENSES`` beside its executable
(``installers/third_party_licenses.py`` writes it); the dialog opens it with the desktop's viewer.
Run from the Python packages, the licences are those of the installed packages.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget

from app.services.about import version_line
from ui.icon import app_icon
from ui.theme import set_type

THIRD_PARTY_FILE = "THIRD_PARTY_LICENSES"
LOGO_SIZE = 64
WHAT = "A private assistant: it runs language models on this computer, and nothing you write leaves it."
LICENCE = "Hearth is free software under the MIT licence."
INSTALLED_PACKAGES = ("Run from its Python packages, Hearth uses the software installed with them, each "
                      "under the licence in its package's metadata.")


def third_party_licences() -> Path | None:
    """The licences file of an installed Hearth: beside the executable of a frozen app, if there."""
    if not getattr(sys, "frozen", False):
        return None
    path = Path(sys.executable).parent / THIRD_PARTY_FILE
    return path if path.is_file() else None


class AboutDialog(QDialog):
    def __init__(self, data_folder: Path, parent: QWidget | None = None, *,
                 licences: Path | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("about_dialog")
        self.setWindowTitle("About Hearth")
        self.licences = licences
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        logo = QLabel()
        logo.setPixmap(app_icon().pixmap(LOGO_SIZE, LOGO_SIZE))
        logo.setAccessibleName("Hearth")
        layout.addWidget(logo, 0, Qt.AlignmentFlag.AlignHCenter)
        self.title = self._label(version_line(), layout)
        set_type(self.title, "title")  # the type scale (ui.theme), following the text size
        self._label(WHAT, layout)
        self._label(LICENCE, layout)
        self.data_line = self._label(f"Your conversations and models are kept in {data_folder}", layout)
        if licences is None:
            self.licences_line = self._label(INSTALLED_PACKAGES, layout)
        else:
            self.licences_line = self._label(f"The licences of the software Hearth carries are in {licences}",
                                             layout)
            self.licences_button = QPushButton("Third-party licences…")
            self.licences_button.clicked.connect(self.open_licences)
            layout.addWidget(self.licences_button, 0, Qt.AlignmentFlag.AlignHCenter)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _label(self, text: str, layout: QVBoxLayout) -> QLabel:
        label = QLabel(text, wordWrap=True)
        label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(label)
        return label

    def open_licences(self) -> None:
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.licences))):
            self.licences_line.setText(f"No program here opens {self.licences}; open it with a text editor.")

    def text(self) -> str:
        """Everything the dialog says, as one string."""
        return "\n".join(label.text() for label in self.findChildren(QLabel) if label.text())
