"""Example prompts under an empty conversation's welcome, as chat apps offer them: a few cards, each
a short title and the prompt it stands for. Clicking one (or Enter/Space on it) puts its prompt in
the composer, to send or change; nothing is sent by itself."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QPainter, QPalette, QPen
from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from ui.theme import RADIUS, SPACE_M, SPACE_S, SPACE_XS, set_type

EXAMPLES = (
    ("Explain something", "Explain how a rainbow forms, in simple words."),
    ("Write for me", "Write a short, friendly email asking to move our meeting to Friday."),
    ("Help with code", "Write a Python function that checks whether a word is a palindrome, and explain it."),
    ("Plan", "Plan a three-day trip to Lisbon on a small budget."),
)
COLUMNS = 2


class PromptCard(QPushButton):
    """One example: its title over its prompt, on a rounded card outlined from the palette."""

    def __init__(self, title: str, prompt: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompt = prompt
        self.setObjectName("example_prompt")
        self.setAccessibleName(f"{title}: {prompt}")
        self.setToolTip("Put this in the message box")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)  # narrower (a large text size) is taller: the prompt wraps
        self.setSizePolicy(policy)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE_M, SPACE_S, SPACE_M, SPACE_S)
        layout.setSpacing(SPACE_XS)
        heading = QLabel(title)
        heading.setObjectName("example_title")
        body = QLabel(prompt, wordWrap=True)
        body.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        set_type(body, "caption")
        for label in (heading, body):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
            layout.addWidget(label)
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)

    def sizeHint(self):
        return self.layout().sizeHint()

    def minimumSizeHint(self):  # its prompt wraps: a narrow column (a large text size) takes it on more lines
        return self.layout().minimumSize()

    def paintEvent(self, event) -> None:
        palette = self.palette()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        hovered = self.underMouse() or self.hasFocus()
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight if self.hasFocus() else QPalette.ColorRole.Mid), 1))
        painter.setBrush(palette.color(QPalette.ColorRole.AlternateBase if hovered else QPalette.ColorRole.Base))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)
        painter.end()


class ExamplePrompts(QWidget):
    chosen = Signal(str)  # the prompt of the card clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("example_prompts")
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(SPACE_S)
        self.cards: list[PromptCard] = []
        for number, (title, prompt) in enumerate(EXAMPLES):
            card = PromptCard(title, prompt)
            card.clicked.connect(lambda _checked=False, text=prompt: self.chosen.emit(text))
            grid.addWidget(card, number // COLUMNS, number % COLUMNS)
            self.cards.append(card)
