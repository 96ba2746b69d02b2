"""Keep a scroll area at its newest end while the user is there; leave it where the user put it
once they scroll away; follow again once they scroll back to the end.

Whether to follow is decided by where the *user* left the scroll bar, not by where it is when new
text arrives: the chat grows in two steps (a message is added, then the layout measures it, then
the scroll range grows), so a view that asked "am I at the end?" when the text came, or scrolled
to the end before the layout had measured it, left a first overflowing question half in sight
and its answer streaming below the window. Here every growth of the range is followed (while
following), whenever the layout gets to it.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QScrollBar

SLACK_PX = 24  # this close to the end counts as at the end (less than a wheel step)


class FollowNewest(QObject):
    def __init__(self, bar: QScrollBar) -> None:
        super().__init__(bar)
        self.bar = bar
        self.following = True
        self.held = False  # kept at the start (hold_at_top) until resumed or scrolled by the user
        bar.rangeChanged.connect(self._range_changed)
        bar.valueChanged.connect(self._moved)

    def resume(self) -> None:
        """Follow again and go to the end now (a conversation is opened at its newest message)."""
        self.following, self.held = True, False
        self.bar.setValue(self.bar.maximum())

    def hold_at_top(self) -> None:
        """Stay at the start (an empty conversation's welcome) until :meth:`resume` or the user scrolls."""
        self.following, self.held = False, True
        self.bar.setValue(self.bar.minimum())

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self.held:
            self.bar.setValue(self.bar.minimum())
        elif self.following:
            self.bar.setValue(maximum)

    def _moved(self, value: int) -> None:
        """The bar moved: by the user (or clamped to a shorter range); follow only if it is at the end."""
        if self.held:
            self.held = value == self.bar.minimum()
            return
        self.following = value >= self.bar.maximum() - SLACK_PX
