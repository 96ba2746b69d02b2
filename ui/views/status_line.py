"""The line under the model picker that says what just happened ("Read notes.txt: 202 tokens in 1.2 s.
Ask anything about it; every question starts from the saved state.").

Its words matter, so it wraps onto a second line rather than cut them, at any text size. It takes the
width the layout has left and never asks for more (its width policy is Ignored), so a long status
never widens the column it sits in nor narrows the conversation list beside it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class StatusLine(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        super().setText(text or "")
        self.setAccessibleName(text or "")

    def shown_text(self) -> str:
        """What shows: all of it (it wraps, it is never cut)."""
        return self.text()
