"""The local API server's line in the window: its address and how many requests it has had.

Shown only while the server listens ("API http://127.0.0.1:8089/v1 · 3 requests"); hidden while
it starts, after it stops, and while the setting is off.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


def requests_text(count: int) -> str:
    return "1 request" if count == 1 else f"{count:,} requests"


class ApiStatus(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("api_status")
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # the address can be copied
        self.setToolTip("Other programs reach Hearth's local API server at this address "
                        "(Settings → Local API server)")
        self.url: str | None = None
        self.requests = 0
        self.setVisible(False)

    def watch(self, server) -> None:
        """Follow an :class:`ui.api_server.ApiServerProcess`'s signals."""
        server.listening.connect(self.show_listening)
        server.requests_changed.connect(self.show_requests)
        server.stopped.connect(self.clear)

    def show_listening(self, url: str) -> None:
        self.url, self.requests = url, 0
        self._render()
        self.setVisible(True)

    def show_requests(self, count: int) -> None:
        self.requests = count
        self._render()

    def clear(self) -> None:
        self.url, self.requests = None, 0
        self.setText("")
        self.setVisible(False)

    def _render(self) -> None:
        if self.url is not None:
            self.setText(f"API {self.url} · {requests_text(self.requests)}")
