"""What the window shows about messages leaving this computer: the persistent line above the chat of
a conversation answered on a remote engine, and the question asked before they first do.

The marker is not a notice: it cannot be dismissed, and it stays for as long as the conversation on
screen uses or has used a remote engine (:class:`ui.engine_choice.EngineChoice` says when).
"""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from ui.remote_text import consent_question


class RemoteMarker(QLabel):
    """"answered on NAME: messages leave this computer", or hidden."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("remote_marker")
        self.setWordWrap(True)
        self.setMargin(4)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.AlternateBase)  # quiet, in light and dark themes
        self.hide()

    def show_text(self, text: str) -> None:
        self.setText(f"⇄ {text}" if text else "")
        self.setAccessibleName(text)
        self.setVisible(bool(text))


def ask_consent(parent: QWidget, name: str, url: str) -> bool:
    """Ask whether the open conversation's messages may go to the engine ``name`` at ``url``."""
    box = QMessageBox(QMessageBox.Icon.Question, "Send to a remote engine?", consent_question(name, url),
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, parent)
    box.setObjectName("remote_consent")
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes
