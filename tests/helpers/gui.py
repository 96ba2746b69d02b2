"""The app's window driven from a test: its settings file, waiting on its work, reading its store.

Helpers wait on the Qt event loop, never sleep. A :class:`RunningApp` waits as long as a real worker
and model may take; one on the scripted engine (tests/ui/controllers) is given ``wait_ms``, a
short bound, so a test that fails does so at once.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

import msgspec
from PySide6.QtCore import Qt

from app.services.paths import user_paths
from app.services.settings import Settings, save_settings
from app.services.pending_turn import PendingTurn
from ui.main_window import MainWindow

LONG_ANSWER = 4000  # tokens: longer than any test waits for, so stop/kill always land mid-answer


def write_settings(**changes) -> Settings:
    """Save ``Settings()`` with ``changes`` where the app reads them (the test's HEARTH_HOME)."""
    settings = msgspec.structs.replace(Settings(), **changes)
    save_settings(settings, user_paths().ensure().config, npu_available=True)
    return settings


@dataclass
class RunningApp:
    qtbot: object
    window: MainWindow
    finished_turns: list[PendingTurn] = field(default_factory=list)
    wait_ms: int = 0  # 0: each wait's own bound, for a real worker; set: every wait's bound

    @property
    def controller(self):
        return self.window.controller

    @property
    def documents(self):
        return self.window.documents

    def wait(self, condition, timeout: int = 30_000) -> None:
        """Until ``condition()`` holds, on the event loop; ``timeout`` ms unless ``wait_ms`` bounds every wait."""
        self.qtbot.waitUntil(condition, timeout=self.wait_ms or timeout)

    def wait_loaded(self, timeout: int = 60_000) -> None:
        self.wait(lambda: self.controller.loaded is not None, timeout)

    def type_and_send(self, text: str) -> None:
        composer = self.window.composer.edit
        composer.setFocus()
        composer.setPlainText(text)
        self.qtbot.keyClick(composer, Qt.Key.Key_Return)

    def wait_turn(self, count: int = 1, timeout: int = 120_000) -> PendingTurn:
        """Wait until ``count`` turns have ended and been stored in all; the last one."""
        self.wait(lambda: len(self.finished_turns) >= count and not self.controller.generating, timeout)
        return self.finished_turns[count - 1]

    def send_and_wait(self, text: str) -> PendingTurn:
        before = len(self.finished_turns)
        self.type_and_send(text)
        return self.wait_turn(before + 1)

    def transcript(self) -> list[tuple[str, str, str]]:
        return [(r.message.role, r.message.content, r.message.status) for r in self.controller.messages.rows()]

    def wait_idle_store(self) -> None:
        self.wait(lambda: not self.controller.store.busy, 30_000)

    def kill_worker(self) -> None:
        os.kill(self.controller.bridge.client.pid, signal.SIGKILL)


def stored(app: RunningApp, read):
    """What ``read(store)`` returns, run on the app's store thread after the work queued before it."""
    results = []
    app.controller.store.submit(read, results.append)
    app.wait(lambda: bool(results), 30_000)
    return results[0]


def watch_notices(app: RunningApp) -> list[tuple[str, str]]:
    """Every notice the controller gives the banner from now on, ``(kind, text)`` in order: plain,
    about the conversation, and those that go with their cause (ui.notices)."""
    notices: list[tuple[str, str]] = []
    c = app.controller
    for said in (c.notice, c.conversation_notice):
        said.connect(lambda kind, text: notices.append((kind, text)))
    c.passing_notice.connect(lambda kind, text, _cause: notices.append((kind, text)))
    return notices
