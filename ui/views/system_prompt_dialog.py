"""One conversation's system prompt: what the model is told before every message of it.

The dialog edits text only; :mod:`ui.system_prompt_editor` reads the conversation and stores the
result. "Use default" fills in the default from Settings (the one new conversations start with);
an empty prompt sends none, so the model's own default applies. Enter starts a new line (a prompt
often has several); Ctrl+Enter, like the OK button, accepts.
"""

from __future__ import annotations

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

EXPLANATION = ("The model reads this before every message of “{title}”. A change applies from your next message; "
               "earlier answers stay as they were written. Leave it empty for the model's own default.")


class SystemPromptDialog(QDialog):
    def __init__(self, title: str, text: str, default: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("System prompt")
        self.result_text: str | None = None  # set when accepted
        self._default = default
        layout = QVBoxLayout(self)
        explanation = QLabel(EXPLANATION.format(title=title), objectName="system_prompt_explanation", wordWrap=True)
        self.edit = QPlainTextEdit(objectName="system_prompt", placeholderText="No system prompt")
        self.edit.setPlainText(text)
        self.edit.setTabChangesFocus(True)
        explanation.setBuddy(self.edit)
        layout.addWidget(explanation)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self._buttons())
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.accept)
        self.resize(520, 320)
        self.edit.setFocus()

    def _buttons(self) -> QDialogButtonBox:
        standard = QDialogButtonBox.StandardButton
        buttons = QDialogButtonBox(standard.Ok | standard.Cancel | standard.RestoreDefaults)
        restore = buttons.button(standard.RestoreDefaults)
        restore.setText("Use &default")
        restore.setToolTip("The default system prompt from Settings → Chat" if self._default
                           else "Settings → Chat has no default system prompt: this empties the box")
        restore.setAutoDefault(False)
        restore.clicked.connect(lambda: self.edit.setPlainText(self._default))
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        return buttons

    def accept(self) -> None:
        self.result_text = self.edit.toPlainText().strip()
        super().accept()
