"""What an empty conversation shows: what Hearth is, that what is written stays on this computer
and in which folder, and where a bigger model comes from (the Models page, one click away)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from model_store.installed import EMBEDDED_NAME
from ui.icon import app_icon
from ui.theme import set_type, text_scale

TITLE = "Welcome to Hearth"
LOGO_SIZE = 64  # px at 100 % text size: it grows with the text, so it keeps its place above the title
WHAT = ("Hearth is an assistant that runs a language model on this computer. Ask it anything, or drop a "
        "document here and ask about it.")
PRIVATE = ("Nothing you write leaves this computer: there is no account, and answers are written here, "
           "without a connection. Your conversations are kept in {folder}.")
BIGGER_MODEL = (f"The built-in model, {EMBEDDED_NAME}, is small: quick, but often wrong. For better answers, "
                "download a bigger one from the Models page (File → Models…, Ctrl+M); only a download goes online.")
OTHER_MODEL = ("You are talking to {name}. Other models, and downloads of more, are on the Models page "
               "(File → Models…, Ctrl+M).")


def paragraphs(data_folder: Path | None) -> tuple[str, str, str]:
    folder = f"Hearth's data folder, {data_folder}" if data_folder is not None else "Hearth's data folder"
    return WHAT, PRIVATE.format(folder=folder), BIGGER_MODEL


class Welcome(QWidget):
    models_requested = Signal()

    def __init__(self, parent: QWidget | None = None, *, data_folder: Path | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chat_welcome")
        layout = QVBoxLayout(self)
        layout.setSpacing(12)
        layout.setContentsMargins(48, 48, 48, 24)
        self.logo = QLabel()
        self.logo.setObjectName("welcome_logo")
        self.logo.setAccessibleName("Hearth")
        self._size_logo()
        layout.addWidget(self.logo, 0, Qt.AlignmentFlag.AlignHCenter)
        self.title = QLabel(TITLE)
        self.title.setObjectName("welcome_title")
        set_type(self.title, "display")  # the type scale's largest, following the text size (ui.theme)
        layout.addWidget(self.title, 0, Qt.AlignmentFlag.AlignHCenter)
        self.paragraphs = []
        for text in paragraphs(data_folder):
            label = QLabel(text, wordWrap=True)
            label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            label.setForegroundRole(QPalette.ColorRole.PlaceholderText if text is not WHAT
                                    else QPalette.ColorRole.WindowText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.paragraphs.append(label)
            layout.addWidget(label)
        self.models_button = QPushButton("Browse models…")
        self.models_button.setObjectName("welcome_models")
        self.models_button.clicked.connect(self.models_requested)
        layout.addWidget(self.models_button, 0, Qt.AlignmentFlag.AlignHCenter)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "logo"):  # the text size changed
            self._size_logo()

    def _size_logo(self) -> None:
        size = round(LOGO_SIZE * text_scale())
        self.logo.setPixmap(app_icon().pixmap(size, size))
        self.logo.setFixedSize(size, size)

    def show_model(self, name: str) -> None:
        """The loaded model, named in the last paragraph: the built-in one is said to be small, any
        other by its name (the welcome described the built-in model whatever was loaded)."""
        self.paragraphs[-1].setText(BIGGER_MODEL if name == EMBEDDED_NAME else OTHER_MODEL.format(name=name))

    def text(self) -> str:
        """Everything the welcome says, as one string (what a reader, or a screen reader, gets)."""
        return "\n".join([self.title.text(), *(label.text() for label in self.paragraphs)])
