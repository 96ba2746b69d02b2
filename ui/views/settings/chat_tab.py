"""Settings → Chat: the default system prompt, what a conversation longer than the model can read
does, the theme, the text size, and drafted text's highlight.

The system prompt here is the one a new conversation starts with; each conversation keeps its own,
changed from its menu in the list (:mod:`ui.views.system_prompt_dialog`). The theme and the text
size are applied when the dialog is accepted (:func:`ui.theme.apply_appearance`).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QPlainTextEdit

from app.services.context_cut import WHEN_FULL_LABELS
from app.services.settings import Settings
from ui.theme import TEXT_SIZES
from ui.views.settings.form import FieldRows, SettingsTab, combo, note, select

THEME_CHOICES = (("system", "Same as the system"), ("light", "Light"), ("dark", "Dark"))
DEFAULT_TEXT_SIZE = Settings().text_size


def _size_text(percent: int) -> str:
    return f"{percent} %" + (" (default)" if percent == DEFAULT_TEXT_SIZE else "")


class ChatTab(SettingsTab):
    title = "Chat"
    fields = ("system_prompt", "when_full", "theme", "text_size", "highlight_drafts")

    def __init__(self, rows: FieldRows) -> None:
        super().__init__(rows)
        prompt = self.group("System prompt")
        self.system_prompt = QPlainTextEdit(objectName="system_prompt", placeholderText="None: the model's own default")
        self.system_prompt.setTabChangesFocus(True)  # Tab moves on, as in every other field
        self.system_prompt.setFixedHeight(self.system_prompt.fontMetrics().lineSpacing() * 5 + 12)
        rows.row(prompt, "&New conversations:", "system_prompt", self.system_prompt)
        prompt.addRow("", note("What the model reads before every message. Each conversation keeps the one it "
                               "started with; change it from the conversation's menu in the list (System prompt…)."))
        long = self.group("When a conversation gets too long")  # a short title: group titles do not wrap
        self.when_full = combo("when_full", tuple(WHEN_FULL_LABELS.items()))
        rows.row(long, "&Then:", "when_full", self.when_full)
        long.addRow("", note("Leaving out the oldest messages keeps the conversation going: the system prompt and "
                             "loaded documents stay, and every message stays saved."))
        look = self.group("Appearance")
        self.theme = combo("theme", THEME_CHOICES)
        self.text_size = combo("text_size", tuple((size, _size_text(size)) for size in TEXT_SIZES))
        self.highlight_drafts = QCheckBox("&Highlight text that came from accepted drafts", objectName="highlight_drafts")
        rows.row(look, "&Theme:", "theme", self.theme)
        rows.row(look, "Te&xt size:", "text_size", self.text_size)
        rows.row(look, "", "highlight_drafts", self.highlight_drafts)
        self.finish()

    def fill(self, s: Settings) -> None:
        self.system_prompt.setPlainText(s.system_prompt)
        select(self.theme, s.theme)
        select(self.when_full, s.when_full)
        if self.text_size.findData(s.text_size) < 0:  # a size set in settings.json, not one of those offered
            self.text_size.addItem(_size_text(s.text_size), s.text_size)
        select(self.text_size, s.text_size)
        self.highlight_drafts.setChecked(s.highlight_drafts)

    def values(self) -> dict[str, Any]:
        return {"system_prompt": self.system_prompt.toPlainText().strip(), "when_full": self.when_full.currentData(),
                "theme": self.theme.currentData(),
                "text_size": self.text_size.currentData(), "highlight_drafts": self.highlight_drafts.isChecked()}
