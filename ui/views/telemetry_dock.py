"""The telemetry panel's dock: closed for a new user (its measurements mean little on the first
day), one click away under View → Telemetry, and open or closed as the user last left it.

The window keeps that choice in the settings (``Settings.telemetry_open``): the dock says when the
*user* opened or closed it (:attr:`TelemetryDock.opened_changed`: the View menu's check, or the
dock's own close button), not when it is hidden because the window closes or is minimised (which
Qt 6 also reports as the menu action's check going off, so that is not what is listened to).

The panel scrolls up and down in the dock: at a large text size its rows are taller than a small
window, and a window never grows past the screen to hold them.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QFrame, QScrollArea, QWidget

TITLE = "Telemetry"


class _UpAndDown(QScrollArea):
    """Scrolls only up and down, so it is at least as wide as what it holds (with room for its bar)."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        inner = self.widget()
        hint = super().minimumSizeHint()
        if inner is None:
            return hint
        return QSize(inner.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width(), hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        inner = self.widget()
        hint = super().sizeHint()
        if inner is None:
            return hint
        return QSize(inner.sizeHint().width() + self.verticalScrollBar().sizeHint().width(), hint.height())


class TelemetryDock(QDockWidget):
    opened_changed = Signal(bool)

    def __init__(self, panel: QWidget, parent: QWidget, *, is_open: bool) -> None:
        super().__init__(TITLE, parent)
        self.setObjectName("telemetry_dock")
        scroll = _UpAndDown()
        scroll.setObjectName("telemetry_scroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(panel)
        self.panel = panel
        self.setWidget(scroll)
        self.toggleViewAction().setChecked(is_open)
        self.setVisible(is_open)
        self.toggleViewAction().triggered.connect(self.opened_changed)  # View → Telemetry

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override): its close button
        super().closeEvent(event)
        if event.isAccepted():
            self.opened_changed.emit(False)
