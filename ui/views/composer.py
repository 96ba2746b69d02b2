"""Where the user writes: Enter sends, Shift+Enter starts a new line, Esc stops the answer.

One button sends or, while an answer is being written, stops it; Regenerate is enabled only while
there is an answer to regenerate (the window says so: :meth:`Composer.set_can_regenerate`). When
the user edits an earlier message, a line above the text box says so and Esc leaves editing.

Under the text box, "Think before answering" (:mod:`ui.views.thinking_switch`) shows for a
reasoning model only; the window keeps what it is set to (:mod:`ui.thinking_choice`).

Attach opens a file dialog (:mod:`ui.views.attach_dialog`) where the last document attached was,
else in the user's documents folder.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from ui.views.attach_dialog import attach_dialog
from ui.views.thinking_switch import ThinkingSwitch


class ComposerEdit(QPlainTextEdit):
    submitted = Signal()
    escaped = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.escaped.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    regenerate_requested = Signal()
    edit_cancelled = Signal()
    attach_requested = Signal(str)  # a file to load as a document

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.generating = False
        self.editing = False
        self.can_regenerate = False
        self.attach_folder: Path | None = None  # where the last attached document was
        self.attach_dialog: QFileDialog | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.editing_note = QLabel("Editing a message: Enter sends it as a new version, Esc cancels.")
        self.editing_note.setObjectName("editing_note")
        self.editing_note.hide()
        layout.addWidget(self.editing_note)
        row = QHBoxLayout()
        self.edit = ComposerEdit()
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText("Message (Enter sends, Shift+Enter for a new line)")
        self.edit.setAccessibleName("Message")
        self.edit.setTabChangesFocus(True)
        self.edit.setFixedHeight(80)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("send_button")
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setObjectName("regenerate_button")
        self.regenerate_button.setToolTip("Write another answer to the last message (Ctrl+R)")
        self.regenerate_button.setEnabled(False)
        self.attach_button = QPushButton("Attach…")
        self.attach_button.setObjectName("attach_button")
        self.attach_button.setToolTip("Read a document (text, Markdown, HTML, PDF, code) into this conversation; "
                                      "or drop a file on the chat")
        row.addWidget(self.edit, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.regenerate_button)
        row.addLayout(buttons)
        layout.addLayout(row)
        self.thinking = ThinkingSwitch()
        layout.addWidget(self.thinking)
        self.edit.submitted.connect(self._submit)
        self.edit.escaped.connect(self._escape)
        self.send_button.clicked.connect(self._button)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.attach_button.clicked.connect(self._choose_file)

    def _choose_file(self) -> None:
        """Open the attach dialog (window-modal; the choice arrives in :meth:`_attach_chosen`)."""
        dialog = attach_dialog(self, self.attach_folder)
        dialog.fileSelected.connect(self._attach_chosen)
        dialog.finished.connect(lambda _result: setattr(self, "attach_dialog", None))
        self.attach_dialog = dialog
        dialog.open()

    def _attach_chosen(self, path: str) -> None:
        if path:
            self.attach_folder = Path(path).parent
            self.attach_requested.emit(path)

    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str) -> None:
        self.edit.setPlainText(text)
        self.edit.moveCursor(self.edit.textCursor().MoveOperation.End)

    def set_generating(self, generating: bool) -> None:
        self.generating = generating
        self.send_button.setText("Stop" if generating else "Send")
        self.send_button.setToolTip("Stop the answer (Esc)" if generating else "Send (Enter)")
        self.regenerate_button.setEnabled(self.can_regenerate and not generating)

    def set_can_regenerate(self, can: bool) -> None:
        """Whether the conversation on screen has an answer that can be written again."""
        self.can_regenerate = can
        self.regenerate_button.setEnabled(can and not self.generating)

    def set_editing(self, text: str | None) -> None:
        self.editing = text is not None
        self.editing_note.setVisible(self.editing)
        if text is not None:
            self.set_text(text)
            self.edit.setFocus()

    def _submit(self) -> None:
        if self.generating:
            return
        text = self.text()
        if text.strip():
            self.send_requested.emit(text)

    def _button(self) -> None:
        if self.generating:
            self.stop_requested.emit()
        else:
            self._submit()

    def _escape(self) -> None:
        if self.generating:
            self.stop_requested.emit()
        elif self.editing:
            self.edit.clear()
            self.edit_cancelled.emit()
