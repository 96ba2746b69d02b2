"""The window's one notice line: what happened, and at most one thing to do about it.

A new notice replaces the old one, so a worker that dies shows one banner, not a pile of them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

KINDS = ("info", "warning", "error")
STRONG = {"warning": "#8a5300", "error": "#a4262c"}


class Banner(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.kind = "info"
        layout = QHBoxLayout(self)
        self.label = QLabel(wordWrap=True)
        self.label.setObjectName("banner_text")
        self.action = QPushButton()
        self.action.setObjectName("banner_action")
        self.close_button = QToolButton(text="✕", toolTip="Dismiss", autoRaise=True)
        self.close_button.setAccessibleName("Dismiss notice")
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action)
        layout.addWidget(self.close_button)
        self.close_button.clicked.connect(self.dismiss)
        self._action: Callable[[], None] | None = None
        self.action.clicked.connect(self._run_action)
        self.hide()

    def show_notice(self, kind: str, text: str, action_text: str | None = None,
                    action: Callable[[], None] | None = None) -> None:
        self.kind = kind if kind in KINDS else "info"
        self.label.setText(text)
        self.label.setAccessibleName(f"{self.kind}: {text}")
        self._action = action
        self.action.setText(action_text or "")
        self.action.setVisible(action is not None)
        self._colour()
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def dismiss(self) -> None:
        self._action = None
        self.hide()

    def _run_action(self) -> None:
        action = self._action
        self.dismiss()
        if action is not None:
            action()

    def _colour(self) -> None:
        """Info blends with the theme; warnings and errors use strong colours readable in light and dark."""
        palette = self.parentWidget().palette() if self.parentWidget() else self.palette()
        if self.kind in STRONG:
            palette.setColor(QPalette.ColorRole.Window, QColor(STRONG[self.kind]))
            palette.setColor(QPalette.ColorRole.WindowText, QColor("white"))
        else:
            palette.setColor(QPalette.ColorRole.Window, palette.color(QPalette.ColorRole.AlternateBase))
        self.setPalette(palette)
