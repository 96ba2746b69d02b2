"""Asking the user before a tool runs: what the model wants to run, with which arguments, and three
answers: run it this once, always run this tool, or do not run it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

from app.services.tool_text import MAX_SHOWN_ARGUMENTS
from engine import protocol as p


def ask_tool_consent(parent: QWidget, call: p.ToolCall) -> str:
    """"once", "always" or "no" (the dialog closed counts as no)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Run a tool?")
    box.setText(f"The model wants to run the tool “{call.name}”.")
    arguments = call.arguments if len(call.arguments) <= MAX_SHOWN_ARGUMENTS else call.arguments[:MAX_SHOWN_ARGUMENTS] + " …"
    box.setInformativeText(f"With: {arguments}")
    box.setTextFormat(Qt.TextFormat.PlainText)  # the name and arguments come from the model
    once = box.addButton("Run once", QMessageBox.ButtonRole.AcceptRole)
    always = box.addButton("Always run this tool", QMessageBox.ButtonRole.YesRole)
    no = box.addButton("Don't run", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(no)
    box.exec()
    clicked = box.clickedButton()
    return "once" if clicked is once else "always" if clicked is always else "no"
