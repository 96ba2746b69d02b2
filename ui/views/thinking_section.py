"""The "Thinking" section above a reasoning model's answer: what it thought before answering.

It is shown only for an answer that has reasoning (``Message.reasoning``), so other answers look as
they always did. While the model thinks, the section is open and its text grows with each render
of the message; when the answer's text begins it closes to one header line, "Thought for 3.2 s ·
120 words", which opens and closes it again (a click, or Space on the focused header). A stored
answer's section starts closed. Once the user has opened or closed it, that choice is kept for
the message, whatever the stream does next.

The reasoning is the model's text, so it is shown as data: a plain-text label (never Markdown, never
HTML), with control characters made visible (:func:`visible_reasoning`) instead of reaching Qt's
text layout. A collapsed section does not lay its text out at all, so a long reasoning costs
nothing while it is closed.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QToolButton, QVBoxLayout, QWidget

from ui.formatting import fmt_ms
from ui.views.text_label import MessageText

INDENT = 14  # the reasoning sits a little in from the answer, under the header's arrow
# C0 controls but tab and newline become their visible "control pictures" (U+2400 + code); DEL and
# the C1 controls, which have none, the replacement character.
_VISIBLE = {**{code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)},
            0x7F: 0x2421, **{code: 0xFFFD for code in range(0x80, 0xA0)}}


def visible_reasoning(text: str) -> str:
    """The reasoning as it is shown: trimmed, line ends as newlines, control characters visible."""
    return text.strip().replace("\r\n", "\n").translate(_VISIBLE)


def reasoning_header(reasoning: str, *, thinking: bool, seconds: float | None) -> str:
    """"Thinking… · 42 words" while it thinks, then "Thought for 3.2 s · 120 words" (or "Thought ·
    120 words" when how long it took was not recorded)."""
    n = len(reasoning.split())
    words = f"{n:,} word" + ("" if n == 1 else "s")
    if thinking:
        return f"Thinking… · {words}"
    took = f" for {fmt_ms(seconds * 1000)}" if isinstance(seconds, (int, float)) and seconds >= 0 else ""
    return f"Thought{took} · {words}"


class ThinkingSection(QWidget):
    """A header button that opens and closes the reasoning under it (hidden when there is none)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinking_section")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.header = QToolButton()
        self.header.setObjectName("thinking_header")
        self.header.setAutoRaise(True)  # not checkable: a pressed look would read as a state of its own
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.header.setToolTip("Show or hide what the model thought before answering")
        self.header.setAccessibleDescription(self.header.toolTip())
        self.header.clicked.connect(lambda: self.set_expanded(not self.expanded))
        self.text = MessageText()
        self.text.setObjectName("thinking_text")
        self.text.setTextFormat(Qt.TextFormat.PlainText)  # the model's text, never markup
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                          | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.text.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.text.setContentsMargins(INDENT, 0, 0, 4)
        self.text.setAccessibleName("Reasoning")
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.text)
        self._raw = ""  # as given: a render that brings no new reasoning reworks nothing
        self._reasoning = ""  # as shown (visible_reasoning)
        self._thinking = False
        self._user_choice: bool | None = None  # opened or closed by the user: kept for this message
        self.setVisible(False)
        self._apply()

    @property
    def expanded(self) -> bool:
        """Open: while the model thinks, then as the user last chose."""
        return self._user_choice if self._user_choice is not None else self._thinking

    @property
    def reasoning(self) -> str:
        return self._reasoning

    def reset(self) -> None:
        """Another message is shown here: the user's choice was about the one before."""
        self._user_choice = None

    def show_reasoning(self, reasoning: str, *, thinking: bool, seconds: float | None = None) -> None:
        """Show ``reasoning`` (hidden when empty); ``thinking``: the answer's text has not begun."""
        if reasoning != self._raw:
            self._raw, self._reasoning = reasoning, visible_reasoning(reasoning)
        self._thinking = thinking
        self.setVisible(bool(self._reasoning))
        self.header.setText(reasoning_header(self._reasoning, thinking=thinking, seconds=seconds))
        self._apply()

    def set_expanded(self, on: bool) -> None:
        """Open or close it as the user does."""
        self._user_choice = on
        self._apply()

    def _apply(self) -> None:
        expanded = self.expanded and bool(self._reasoning)
        self.header.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.header.setAccessibleName(f"{self.header.text()}, {'shown' if expanded else 'hidden'}")
        if expanded and self.text.text() != self._reasoning:
            self.text.setText(self._reasoning)
        self.text.setVisible(expanded)
