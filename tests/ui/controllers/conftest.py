"""The window built as ``python -m app`` builds it (:func:`ui.app.build_window` on
:func:`app.surfaces.gui.app_parts`), with one part changed: its engine client is the scripted one of
:mod:`tests.fakes.engine_client` instead of a worker process. Everything else is real: the
controllers, the store thread and the SQLite file in the test's ``HEARTH_HOME``. No model, no
worker: each test runs in a fraction of a second.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.surfaces.gui import app_parts
from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.gui import RunningApp
from ui.app import build_window

WAIT_MS = 3_000  # the scripted engine answers at once: a wait this long means the test failed


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine()


@pytest.fixture
def start_scripted(qtbot, engine):
    """Start the window on ``engine`` (script it first for the load); waits for the model unless told not to."""

    def start(*, wait_loaded: bool = True) -> RunningApp:
        window = build_window(replace(app_parts(), make_client=lambda: engine))
        qtbot.addWidget(window)  # closed (which stops the bridge and the store thread) when the test ends
        window.show()
        app = RunningApp(qtbot, window, wait_ms=WAIT_MS)
        window.controller.turn_finished.connect(app.finished_turns.append)
        if wait_loaded:
            app.wait_loaded()
        return app

    return start
