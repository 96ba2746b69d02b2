"""The reading bar shown while a document is read (tokens done of total, speed, time left, Cancel),
and the choice offered when a document does not fit the model's context."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDialogButtonBox, QHBoxLayout, QLabel, QMessageBox, QProgressBar, QPushButton,
                               QSizePolicy, QWidget)

from ui.formatting import fmt_duration
from ui.theme import text_scale

BOX_WIDTH = 500  # px at 100 %: how wide Qt makes a message box with a long text (its "soft limit")
SIDE_SLACK = 24  # px: the grid's spacing between the icon and the text, and rounding


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
        """``done`` of ``total`` tokens read; the speed and the time left only once there is a speed
        (nothing read yet says nothing about either: no "0 tok/s · 0 s left")."""
        self.bar.setValue(int(1000 * done / total) if total else 0)
        text = f"Reading {done:,} of {total:,} tokens"
        if done > 0 and tok_s > 0:
            text += f" · {tok_s:,.0f} tok/s · about {fmt_duration(eta_s)} left"
        self.label.setText(text if done > 0 and tok_s > 0 else text + "…")


class PartChoice(QMessageBox):
    """A document too long for the context: read its first part, its last part, or nothing; and,
    when the context can grow to hold it (``whole_tokens`` given), first of all: read all of it.

    The text says by how much it is too long and what would read all of it; nothing is cut unless
    one of the parts is chosen. With ``model_button`` (a catalogue model that reads it whole), a
    button of that text comes first and emits ``model_chosen``.
    """

    part_chosen = Signal(str)  # "all" | "first" | "last"
    model_chosen = Signal()  # the suggested model's button

    def __init__(self, text: str, parent: QWidget | None = None, *, whole_tokens: int | None = None,
                 model_button: str = "") -> None:
        grows = whole_tokens is not None
        super().__init__(QMessageBox.Icon.Question if grows else QMessageBox.Icon.Warning,
                         "The document needs a longer context" if grows else "The document does not fit", text,
                         QMessageBox.StandardButton.Cancel, parent)
        self.setObjectName("document_part_choice")
        self.all: QPushButton | None = None
        self.get_model: QPushButton | None = None
        if model_button:
            self.get_model = self.addButton(model_button, QMessageBox.ButtonRole.AcceptRole)
            self.get_model.setObjectName("document_get_model")
            self.get_model.clicked.connect(self.model_chosen)
            self.setDefaultButton(self.get_model)
        if grows:
            self.all = self.addButton(f"Read all of it (needs {whole_tokens:,} tokens, fits in memory)",
                                      QMessageBox.ButtonRole.AcceptRole)
            self.all.setObjectName("document_part_all")
            self.all.clicked.connect(lambda: self.part_chosen.emit("all"))
            self.setDefaultButton(self.all)
        self.first = self.addButton("Read the first part", QMessageBox.ButtonRole.AcceptRole)
        self.last = self.addButton("Read the last part", QMessageBox.ButtonRole.AcceptRole)
        self.first.setObjectName("document_part_first")
        self.last.setObjectName("document_part_last")
        self.first.clicked.connect(lambda: self.part_chosen.emit("first"))
        self.last.clicked.connect(lambda: self.part_chosen.emit("last"))
        self.finished.connect(self.deleteLater)
        _stack_buttons(self)


def _stack_buttons(box: QMessageBox) -> None:
    """The choices one under another, as wide as the box: side by side, four long ones are wider than
    a screen at a large text size, and Qt then squeezes their words out of them."""
    buttons = box.findChild(QDialogButtonBox)
    if buttons is not None:
        buttons.setOrientation(Qt.Orientation.Vertical)
        buttons.setSizePolicy(QSizePolicy.Policy.Expanding, buttons.sizePolicy().verticalPolicy())  # Qt: Fixed
        for button in buttons.buttons():
            button.setSizePolicy(QSizePolicy.Policy.Expanding, button.sizePolicy().verticalPolicy())
    _widen_text(box)


def _widen_text(box: QMessageBox) -> None:
    """Lines of the same number of words at any text size. Qt wraps a message box's text to fit a
    500 px box whatever the font, so at 200 % a long text made the box taller than a 1280×720 screen;
    the box grows wider with the text size instead, up to the widest Qt allows on the screen. (Qt
    wraps the text only when it is wider than those 500 px: a smaller box is left to Qt.)"""
    label, screen = box.findChild(QLabel, "qt_msgbox_label"), box.screen()
    if label is None or screen is None:
        return
    screen_width = screen.availableGeometry().width()
    usual = min(screen_width // 2, BOX_WIDTH)  # Qt's "soft limit"
    widest = screen_width if screen_width <= 1024 else min(screen_width - 480, 1000)  # Qt's "hard limit"
    wanted = min(round(usual * text_scale()), widest)
    if wanted > usual:
        icon = box.findChild(QLabel, "qt_msgboxex_icon_label")
        margins = box.layout().contentsMargins()
        side = (icon.sizeHint().width() if icon is not None else 0) + margins.left() + margins.right() + SIDE_SLACK
        label.setMinimumWidth(wanted - side)


class LoadedBeforeChoice(QMessageBox):
    """The same document is already in a conversation: open that one, or read it again into a new
    one (named apart: ``report.txt (2)``). Cancel adds nothing."""

    open_chosen = Signal()
    again_chosen = Signal()
    dropped = Signal()  # Cancel, Esc or the window closed: neither choice

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(QMessageBox.Icon.Question, "Already loaded", text, QMessageBox.StandardButton.Cancel, parent)
        self.setObjectName("document_loaded_before")
        self.open_it = self.addButton("Open that conversation", QMessageBox.ButtonRole.AcceptRole)
        self.again = self.addButton("Read it again", QMessageBox.ButtonRole.AcceptRole)
        self.open_it.setObjectName("document_open_loaded")
        self.again.setObjectName("document_read_again")
        self.setDefaultButton(self.open_it)
        self.finished.connect(self._chosen)
        self.finished.connect(self.deleteLater)

    def _chosen(self) -> None:
        clicked = self.clickedButton()
        (self.open_chosen if clicked is self.open_it else self.again_chosen if clicked is self.again
         else self.dropped).emit()
