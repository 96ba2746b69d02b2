"""Help → System check: ``hearth doctor``'s report in a dialog, run in a child process, copied as shown."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.services.doctor_report import report_lines

REPORT_TIMEOUT_MS = 180_000  # the child starts an engine worker of its own and probes the NPU


def menu_action(window, menu_title: str, action_text: str):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == menu_title)
    return next(a for a in menu.actions() if a.text() == action_text)


def test_the_system_check_shows_the_doctor_report_and_copies_exactly_what_it_shows(start_app):
    app = start_app()
    app.qtbot.waitUntil(lambda: app.controller.bridge.client.ready is not None, timeout=60_000)
    build_in_use = app.controller.bridge.client.ready.cpu.variant

    menu_action(app.window, "&Help", "&System check…").trigger()
    dialog = app.window.system_check
    app.qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    assert dialog.summary.text() == "Checking this machine…" and not dialog.copy_button.isEnabled()
    app.qtbot.waitUntil(lambda: dialog.report is not None, timeout=REPORT_TIMEOUT_MS)

    shown = dialog.text.toPlainText()
    assert shown == "\n".join(report_lines(dialog.report))
    assert f"\nCPU build of llama.cpp: {build_in_use}: " in shown
    assert shown.endswith("\nNo problems found.") and dialog.summary.text() == "No problems found."
    QGuiApplication.clipboard().clear()
    app.qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == shown
    app.qtbot.waitUntil(lambda: not dialog.job.running, timeout=30_000)
    dialog.reject()
