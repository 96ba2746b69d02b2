"""The real app, built the way ``python -m app`` builds it, driven through its widgets.

Each test gets its own ``HEARTH_HOME`` (the autouse fixture), a ``settings.json`` written there,
a real worker process and a real SQLite file; :mod:`tests.helpers.gui` has what tests use to drive it.
The fast tests in ``controllers/`` run the same window on a scripted engine client instead.
"""

from __future__ import annotations

import gc

import pytest

from app.surfaces.gui import app_parts
from app.services.settings import Settings
from tests.helpers.gui import RunningApp, write_settings
from ui.app import build_window


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


@pytest.fixture
def appearance(qapp, monkeypatch):
    """The test app, put back as it was afterwards: palette, font, style sheet and style (and no
    theme state), for tests that apply a theme or a text size."""
    from PySide6.QtGui import QPalette

    from ui import theme

    palette, font, style = QPalette(qapp.palette()), qapp.font(), qapp.style().name()
    monkeypatch.setattr(theme, "_state", None)
    yield qapp
    theme.apply_appearance(qapp, theme="light", text_size=100)  # stops following the system
    theme._state = None
    qapp.setStyleSheet("")
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)
