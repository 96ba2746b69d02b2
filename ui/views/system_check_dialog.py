"""Help → System check: ``hearth doctor``'s report in a dialog, with a Copy button.

The check runs as ``python -m app doctor --json`` in a child process (:class:`ui.cli_job.CliJob`):
it starts an engine worker of its own and reads the database, so a crash or a slow disk there
cannot touch the window. That worker uses the CPU build the window's engine was asked for (after
"Retry with the safe CPU build", the safe one), so the report describes the engine in use. The text shown and copied is the doctor's own report, turned into lines.
"""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.services.doctor_report import report_lines
from engine.protocol.child_command import VARIANT_ENV
from ui.cli_job import CliJob


class SystemCheckDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, cpu_variant: str = "auto") -> None:
        super().__init__(parent)
        self.setWindowTitle("System check")
        self.resize(720, 480)
        self.summary = QLabel("Checking this machine…", wordWrap=True)
        self.summary.setObjectName("system_check_summary")
        self.text = QPlainTextEdit(readOnly=True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setEnabled(False)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.copy_button.clicked.connect(self.copy)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.report: dict | None = None
        env = {VARIANT_ENV: cpu_variant} if cpu_variant != "auto" else None
        self.job = CliJob(["doctor", "--json"], self, env=env)
        self.job.line.connect(self._report)
        self.job.finished.connect(self._finished)

    def start(self) -> None:
        self.job.start()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())

    def _report(self, report: dict) -> None:
        if "problems" not in report:
            return
        self.report = report
        self.text.setPlainText("\n".join(report_lines(report)))
        problems = report["problems"]
        self.summary.setText(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found."
                             if problems else "No problems found.")
        self.copy_button.setEnabled(True)

    def _finished(self, code: int, last_error: str) -> None:
        if self.report is None:
            self.summary.setText(f"The system check could not finish: {last_error or f'exit status {code}'}")
            self.text.setPlainText(last_error)
            self.copy_button.setEnabled(bool(last_error))

    def done(self, result: int) -> None:
        self.job.stop()
        super().done(result)
