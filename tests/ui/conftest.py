"""The real app, built the way ``python -m app`` builds it, driven through its widgets.

Each test gets its own ``HEARTH_HOME`` (the autouse fixture), a ``settings.json`` written there,
a real worker process and a real SQLite file. Helpers wait on the Qt event loop, never sleep.
"""

from __future__ import annotations

import gc
import os
import signal
from dataclasses import dataclass, field

import msgspec
import pytest
from PySide6.QtCore import Qt

from app.gui import app_parts
from app.paths import user_paths
from app.settings import Settings, save_settings
from app.turn import PendingTurn
from ui.app import build_window
from ui.main_window import MainWindow

LONG_ANSWER = 4000  # tokens: longer than any test waits for, so stop/kill always land mid-answer


def write_settings(**changes) -> Settings:
    settings = msgspec.structs.replace(Settings(), **changes)
    save_settings(settings, user_paths().ensure().config, npu_available=True)
    return settings


@dataclass
class RunningApp:
    qtbot: object
    window: MainWindow
    finished_turns: list[PendingTurn] = field(default_factory=list)

    @property
    def controller(self):
        return self.window.controller

    def wait_loaded(self, timeout: int = 60_000) -> None:
        self.qtbot.waitUntil(lambda: self.controller.loaded is not None, timeout=timeout)

    def type_and_send(self, text: str) -> None:
        composer = self.window.composer.edit
        composer.setFocus()
        composer.setPlainText(text)
        self.qtbot.keyClick(composer, Qt.Key.Key_Return)

    def wait_turn(self, count: int = 1, timeout: int = 120_000) -> PendingTurn:
        """Wait until ``count`` turns have ended and been stored in all; the last one."""
        self.qtbot.waitUntil(lambda: len(self.finished_turns) >= count and not self.controller.generating,
                             timeout=timeout)
        return self.finished_turns[count - 1]

    def send_and_wait(self, text: str) -> PendingTurn:
        before = len(self.finished_turns)
        self.type_and_send(text)
        return self.wait_turn(before + 1)

    def transcript(self) -> list[tuple[str, str, str]]:
        return [(r.message.role, r.message.content, r.message.status) for r in self.controller.messages.rows()]

    def wait_idle_store(self) -> None:
        self.qtbot.waitUntil(lambda: not self.controller.store.busy, timeout=30_000)

    def kill_worker(self) -> None:
        os.kill(self.controller.bridge.client.pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def collect_qt_garbage_on_the_gui_thread():
    """Free each test's Qt wrappers on the GUI thread when it ends. Left to the cycle collector, they
    can be finalized later on another thread (a store thread allocating) while the next test's event
    loop runs, which crashed the suite."""
    yield
    gc.collect()


@pytest.fixture
def start_app(qtbot):
    """Start the app on the saved settings; call again to start it anew on the same data folder."""
    apps: list[RunningApp] = []

    def start() -> RunningApp:
        window = build_window(app_parts())
        qtbot.addWidget(window)
        window.show()
        running = RunningApp(qtbot, window)
        window.controller.turn_finished.connect(running.finished_turns.append)
        apps.append(running)
        return running

    yield start
    for running in apps:
        if running.window.isVisible():
            running.window.close()


@pytest.fixture
def tiny_settings(hybrid_tiny) -> Settings:
    """Greedy answers from the tiny hybrid model, short by default."""
    return write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=24, draft="off")
