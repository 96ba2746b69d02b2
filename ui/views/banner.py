"""The window's one notice line: what happened, and what to do about it (usually one thing; a
crash the app cannot get past by itself offers a few).

A new notice replaces the old one, so a worker that dies shows one banner, not a pile of them.
A notice about a passing state is shown with its cause as its ``scope`` (:mod:`ui.notices`) and
goes by itself when that cause is gone (:meth:`Banner.clear_scope`): one raised by something done
in a conversation (``scope="conversation"``) when the user leaves it or an answer there succeeds,
"no model loaded" when a model loads, a failed write when a later one succeeds. Other notices
stay until dismissed or replaced.
An offer to act (Undo a delete) is the exception: a later notice without an action of its own
shows above it instead of hiding it, so the offer stays until it is used, dismissed, replaced by
another offer or withdrawn (:meth:`Banner.withdraw`, when what it would undo has happened).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from ui.notices import CONVERSATION
from ui.theme import colour

KINDS = ("info", "warning", "error")
STRONG = ("warning", "error")  # on a strong background of their own (ui.theme.colour)


Action = tuple[str, Callable[[], None]]
MAX_ACTIONS = 3


@dataclass
class _Notice:
    kind: str
    text: str
    actions: tuple[Action, ...] = ()
    scope: str = "app"  # "conversation": belongs to the conversation on screen

    @property
    def action(self) -> Callable[[], None] | None:
        return self.actions[0][1] if self.actions else None


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
        self.buttons = [QPushButton() for _ in range(MAX_ACTIONS)]
        for i, button in enumerate(self.buttons):
            button.setObjectName("banner_action" if i == 0 else f"banner_action_{i + 1}")
            button.clicked.connect(lambda _checked=False, i=i: self._run_action(i))
        self.action = self.buttons[0]
        self.close_button = QToolButton(text="✕", toolTip="Dismiss", autoRaise=True)
        self.close_button.setAccessibleName("Dismiss notice")
        layout.addWidget(self.label, 1)
        for button in self.buttons:
            layout.addWidget(button)
        layout.addWidget(self.close_button)
        self.close_button.clicked.connect(self.dismiss)
        self._latest: _Notice | None = None
        self._offer: _Notice | None = None  # the newest notice with actions, while it still applies
        self.hide()

    def show_notice(self, kind: str, text: str, action_text: str | None = None,
                    action: Callable[[], None] | None = None, scope: str = "app") -> None:
        self.show_choices(kind, text, [(action_text or "", action)] if action is not None else [], scope)

    def show_conversation_notice(self, kind: str, text: str) -> None:
        """A notice about the conversation on screen: it goes when that is left (see :meth:`clear_scope`)."""
        self.show_notice(kind, text, scope=CONVERSATION)

    def show_passing(self, kind: str, text: str, cause: str) -> None:
        """A notice that goes by itself when ``cause`` is gone (``clear_scope(cause)``; :mod:`ui.notices`)."""
        self.show_notice(kind, text, scope=cause)

    def show_choices(self, kind: str, text: str, actions: list[Action], scope: str = "app") -> None:
        """A notice with up to ``MAX_ACTIONS`` buttons; pressing one dismisses the notice and runs it."""
        self._latest = _Notice(kind if kind in KINDS else "info", text, tuple(actions[:MAX_ACTIONS]), scope)
        if actions:
            self._offer = self._latest
        self._render()

    def withdraw(self, action: Callable[[], None]) -> None:
        """Stop offering ``action`` (what it would undo has happened); a notice shown after it stays."""
        if self._offer is None or self._offer.action != action:
            return
        if self._latest is self._offer:
            self.dismiss()
            return
        self._offer = None
        self._render()

    def clear_scope(self, scope: str) -> None:
        """Take down the latest notice if it belongs to ``scope`` (its cause is gone; an offer to act stays)."""
        if self._latest is None or self._latest.scope != scope:
            return
        if self._offer is None or self._offer is self._latest:
            self.dismiss()
            return
        self._latest = self._offer
        self._render()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def dismiss(self) -> None:
        self._latest = self._offer = None
        self.hide()

    def _render(self) -> None:
        latest, offer = self._latest, self._offer
        lines = [latest.text] + ([offer.text] if offer is not None and offer is not latest else [])
        self.kind = latest.kind
        self.label.setText("\n".join(lines))
        self.label.setAccessibleName(f"{self.kind}: {' '.join(lines)}")
        actions = offer.actions if offer is not None else ()
        for i, button in enumerate(self.buttons):
            button.setText(actions[i][0] if i < len(actions) else "")
            button.setVisible(i < len(actions))
        self._colour()
        self.show()

    def _run_action(self, index: int) -> None:
        actions = self._offer.actions if self._offer is not None else ()
        self.dismiss()
        if index < len(actions):
            actions[index][1]()

    def _colour(self) -> None:
        """Info blends with the theme; warnings and errors use strong colours readable in light and dark."""
        palette = self.parentWidget().palette() if self.parentWidget() else self.palette()
        if self.kind in STRONG:
            palette.setColor(QPalette.ColorRole.Window, colour(self.kind))
            palette.setColor(QPalette.ColorRole.WindowText, colour("on_notice"))
        else:
            palette.setColor(QPalette.ColorRole.Window, palette.color(QPalette.ColorRole.AlternateBase))
        self.setPalette(palette)
