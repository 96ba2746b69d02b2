"""Telemetry on the scripted engine: switched on at start, shown in the panel, cleared by a death."""

from __future__ import annotations

from ui.formatting import NO_VALUE


def test_telemetry_reaches_the_panel_and_a_death_clears_it(start_scripted, engine):
    app = start_scripted()
    panel = app.window.telemetry_panel
    assert engine.telemetry_interval_ms == app.controller.bridge.telemetry_interval_ms > 0

    engine.telemetry(rss_bytes=300 * 1024**2, available_bytes=2 * 1024**3)
    app.wait(lambda: panel.values()["memory"] == "300.0 MiB (2.00 GiB available)")

    engine.die()
    app.wait(lambda: panel.values()["memory"] == NO_VALUE)
