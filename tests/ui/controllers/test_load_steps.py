"""Issue 51, point 3: the loading bar moves from the first second and says what the load is doing.

Before the worker has measured anything the bar is busy (moving), never a still "0%"; each step the
worker reports (engine.models.load_progress: preparing the built-in model, reading the file, making room,
warming up) is said in words, with the bar at the worker's fraction of the whole load."""

from __future__ import annotations

from engine import protocol as p
from model_store.installed import EMBEDDED_NAME
from tests.fakes.engine_client import hold
from ui.model_loading import LOAD_STEPS


def test_before_the_worker_reports_the_bar_is_busy_not_at_zero(start_scripted, engine):
    engine.script(p.LoadModel, hold())
    engine.load_steps = []
    app = start_scripted(wait_loaded=False)
    bar = app.window.model_picker.progress
    assert bar.isVisibleTo(app.window.model_picker)
    assert (bar.minimum(), bar.maximum()) == (0, 0), "a busy bar, which moves, until there is a fraction"
    app.wait(lambda: engine.holding is not None)
    assert (bar.minimum(), bar.maximum()) == (0, 0)
    engine.release()
    app.wait_loaded()


def test_each_step_of_the_load_is_said_in_words_with_its_share_of_the_bar(start_scripted, engine):
    engine.script(p.LoadModel, hold())
    engine.load_steps = [("prepare", 0.3)]
    app = start_scripted(wait_loaded=False)
    picker = app.window.model_picker
    preparing = LOAD_STEPS["prepare"].format(name=EMBEDDED_NAME)
    app.wait(lambda: picker.state.text() == preparing)
    assert "first time" in preparing and picker.progress.value() == 30 and picker.progress.maximum() == 100
    engine.release()
    app.wait_loaded()

    engine.script(p.LoadModel, hold())
    engine.load_steps = [("load", 0.5), ("context", 0.8), ("warm", 0.9)]
    app.controller.load_model("default")
    warming = LOAD_STEPS["warm"].format(name=EMBEDDED_NAME)
    app.wait(lambda: picker.state.text() == warming)
    assert picker.progress.value() == 90
    assert app.window.telemetry_panel.model_name_label.text() == warming
    engine.release()
    app.wait_loaded()
    assert not picker.progress.isVisibleTo(picker)
