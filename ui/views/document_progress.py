"""The reading bar shown while a document is read: tokens done of total, speed, time left, Cancel."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from ui.formatting import fmt_duration


class DocumentProgress(QWidget):
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("document_progress")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.bar = QProgressBar(maximum=1000)
        self.bar.setObjectName("document_bar")
        self.bar.setAccessibleName("Reading the document")
        self.label = QLabel("Preparing the document…")
        self.label.setObjectName("document_progress_text")
        self.cancel = QPushButton("Cancel")
        self.cancel.setObjectName("document_cancel")
        self.cancel.setToolTip("Stop loading the document; nothing half-read is added to the conversation")
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.label)
        layout.addWidget(self.cancel)
        self.cancel.clicked.connect(self.cancel_requested)
        self.hide()

    def set_reading(self, reading: bool) -> None:
        if reading:
            self.bar.setValue(0)
            self.label.setText("Preparing the document…")
        self.setVisible(reading)

    def show_progress(self, done: int, total: int, tok_s: float, eta_s: float) -> None:
        self.bar.setValue(int(1000 * done / total) if total else 0)
        self.label.setText(f"{done:,} of {total:,} tokens · {tok_s:,.0f} tok/s · {fmt_duration(eta_s)} left")
