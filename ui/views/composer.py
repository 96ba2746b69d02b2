"""Where the user writes: Enter sends, Shift+Enter starts a new line, Esc stops the answer.

As in the chat apps people know, it is one rounded box (:class:`ComposerFrame`): the text field,
growing with what is written up to :data:`MAX_LINES`, and under it, inside the box, Attach on the
left and on the right one button that sends or, while an answer is being written, stops it.
Regenerate is among an answer's own actions (shown on hover or focus) and in Edit → Regenerate
answer (Ctrl+R). When the user edits an earlier message, a line at the top of the box says so and
Esc leaves editing.

In the box, "Think before answering" (:mod:`ui.views.thinking_switch`) shows for a
reasoning model only; the window keeps what it is set to (:mod:`ui.thinking_choice`).

Attach opens a file dialog (:mod:`ui.views.attach_dialog`) where the last document attached was,
else in the user's documents folder.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QRectF, Qt, Signal
from PySide6.QtGui import QKeyEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from ui.theme import RADIUS, SPACE_M, SPACE_S, SPACE_XS, column_width, set_type
from ui.views.attach_dialog import attach_dialog
from ui.views.thinking_switch import ThinkingSwitch

MIN_LINES, MAX_LINES = 2, 10  # the text field grows with the text between these


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


class ComposerFrame(QFrame):
    """The rounded box around the text field and its buttons, outlined more strongly while the
    focus is inside it; painted from the palette, so it follows the theme."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer_frame")
        self.focused = False

    def set_focused(self, focused: bool) -> None:
        self.focused = focused
        self.update()

    def paintEvent(self, event) -> None:
        palette = self.palette()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        border = palette.color(QPalette.ColorRole.PlaceholderText if self.focused else QPalette.ColorRole.Mid)
        painter.setPen(QPen(border, 1))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)
        painter.end()


class Composer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    edit_cancelled = Signal()
    attach_requested = Signal(str)  # a file to load as a document

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.generating = False
        self.editing = False
        self.attach_folder: Path | None = None  # where the last attached document was
        self.attach_dialog: QFileDialog | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.frame = ComposerFrame()
        self.frame.setMaximumWidth(column_width())  # as wide as the conversation's column, under it
        centre = QHBoxLayout()  # centred under the column: the stretches take what the box leaves
        centre.addStretch(0)
        centre.addWidget(self.frame, 1)
        centre.addStretch(0)
        layout.addLayout(centre)
        self._build_box(self.frame)
        self.edit.submitted.connect(self._submit)
        self.edit.escaped.connect(self._escape)
        self.edit.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self.send_button.clicked.connect(self._button)
        self.attach_button.clicked.connect(self._choose_file)
        self._fit_height()

    def _build_box(self, frame: ComposerFrame) -> None:
        """The text field, and under it Attach, the thinking switch and Send, all inside ``frame``."""
        box = QVBoxLayout(frame)
        box.setContentsMargins(SPACE_M, SPACE_S, SPACE_S, SPACE_S)
        box.setSpacing(SPACE_XS)
        self.editing_note = QLabel("Editing a message: Enter sends it as a new version, Esc cancels.", frame)
        self.editing_note.setObjectName("editing_note")
        self.editing_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        set_type(self.editing_note, "caption")
        self.editing_note.hide()
        box.addWidget(self.editing_note)
        self.edit = ComposerEdit(frame)
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText("Message (Enter sends, Shift+Enter for a new line)")
        self.edit.setAccessibleName("Message")
        self.edit.setTabChangesFocus(True)
        self.edit.setFrameShape(QFrame.Shape.NoFrame)
        self.edit.viewport().setAutoFillBackground(False)  # the box's own background shows through
        self.edit.installEventFilter(self)  # the box is outlined while the text field has the focus
        box.addWidget(self.edit)
        row = QHBoxLayout()
        row.setSpacing(SPACE_S)
        self.attach_button = QPushButton("Attach…", frame)
        self.attach_button.setObjectName("attach_button")
        self.attach_button.setFlat(True)
        self.attach_button.setToolTip("Read a document (text, Markdown, HTML, PDF, code) into this conversation; "
                                      "or drop a file on the chat")
        self.thinking = ThinkingSwitch(frame)
        self.send_button = QPushButton("Send", frame)
        self.send_button.setObjectName("send_button")
        self.send_button.setToolTip("Send (Enter)")
        row.addWidget(self.attach_button)
        row.addWidget(self.thinking)
        row.addStretch(1)
        row.addWidget(self.send_button)
        box.addLayout(row)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.edit and event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self.frame.set_focused(event.type() == QEvent.Type.FocusIn)
        return False

    def _fit_height(self, *_) -> None:
        """As tall as the text, from :data:`MIN_LINES` to :data:`MAX_LINES` lines (then it scrolls)."""
        lines = int(self.edit.document().documentLayout().documentSize().height())  # a plain text layout counts lines
        lines = max(MIN_LINES, min(MAX_LINES, lines))
        margins = self.edit.contentsMargins()
        document_margin = 2 * self.edit.document().documentMargin()
        self.edit.setFixedHeight(int(lines * self.edit.fontMetrics().lineSpacing() + document_margin
                                     + margins.top() + margins.bottom()))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "edit"):
            self.frame.setMaximumWidth(column_width())
            self._fit_height()

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
