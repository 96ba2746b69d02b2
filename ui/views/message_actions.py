"""The quiet row of actions under a message: versions ‹ n/m ›, Copy, Edit, Regenerate, New chat.

As in the chat apps people know, the row shows only while the message is under the mouse or the
keyboard focus is in it (on its text or on one of these buttons), so a transcript reads as text.
Hidden, the row keeps its place (it is see-through, not removed), so nothing moves when it shows,
and its buttons stay in the Tab order: Tab from a message's text reaches them, and reveals them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QGraphicsOpacityEffect, QHBoxLayout, QLabel, QToolButton, QWidget

from ui.theme import SPACE_XS, set_type


class MessageActions(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("message_actions")
        self._hovered = False
        self._focused: set[QObject] = set()
        self._opacity = QGraphicsOpacityEffect(self)
        self.setGraphicsEffect(self._opacity)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(SPACE_XS)
        self.previous = self._tool("‹", "Previous version")
        self.version = QLabel()
        self.version.setObjectName("message_version")
        set_type(self.version, "caption")
        self.next = self._tool("›", "Next version")
        self.copy = self._tool("Copy", "Copy this message")
        self.edit = self._tool("Edit", "Edit this message (keeps the original as another version)")
        self.regenerate = self._tool("Regenerate", "Write another answer (keeps this one as another version)")
        self.new_chat = self._tool("New chat from this document",
                                   "Start a new conversation about this document (from its saved state)")
        layout.addStretch(0)
        for widget in (self.previous, self.version, self.next, self.copy, self.edit, self.regenerate, self.new_chat):
            layout.addWidget(widget)
        layout.addStretch(1)
        self._layout = layout
        self._show()

    def _tool(self, text: str, tip: str) -> QToolButton:
        button = QToolButton(text=text, toolTip=tip)
        button.setAccessibleName(tip)
        button.setAutoRaise(True)
        set_type(button, "caption")
        self.watch_focus(button)
        return button

    def align_right(self, right: bool) -> None:
        """A question's actions sit under its right edge; an answer's under its left."""
        self._layout.setStretch(0, 1 if right else 0)
        self._layout.setStretch(self._layout.count() - 1, 0 if right else 1)

    # -- shown on hover or focus -----------------------------------------------------------------

    @property
    def revealed(self) -> bool:
        return self._opacity.opacity() > 0

    def set_hovered(self, hovered: bool) -> None:
        self._hovered = hovered
        self._show()

    def watch_focus(self, widget: QWidget) -> None:
        """Show the row while ``widget`` (a button here, or the message's text) has the focus."""
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.FocusIn:
            self._focused.add(watched)
            self._show()
        elif event.type() == QEvent.Type.FocusOut:
            self._focused.discard(watched)
            self._show()
        return False

    def _show(self) -> None:
        self._opacity.setOpacity(1.0 if self._hovered or self._focused else 0.0)
