"""The telemetry panel's dock: closed for a new user (its measurements mean little on the first
day), one click away under View → Telemetry, and open or closed as the user last left it.

The window keeps that choice in the settings (``Settings.telemetry_open``): the dock says when the
*user* opened or closed it (:attr:`TelemetryDock.opened_changed`: the View menu's check, or the
dock's own close button), not when it is hidden because the window closes or is minimised (which
Qt 6 also reports as the menu action's check going off, so that is not what is listened to).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QWidget

TITLE = "Telemetry"


class TelemetryDock(QDockWidget):
    opened_changed = Signal(bool)

    def __init__(self, panel: QWidget, parent: QWidget, *, is_open: bool) -> None:
        super().__init__(TITLE, parent)
        self.setObjectName("telemetry_dock")
        self.setWidget(panel)
        self.toggleViewAction().setChecked(is_open)
        self.setVisible(is_open)
        self.toggleViewAction().triggered.connect(self.opened_changed)  # View → Telemetry

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override): its close button
        super().closeEvent(event)
        if event.isAccepted():
            self.opened_changed.emit(False)
