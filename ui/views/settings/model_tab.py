"""Settings → Model: which engine answers, how answers are sampled, and the current model's context.

The context is the current model's only (``model_path``, its entry in ``Settings.contexts``; Auto
removes the entry), with what the loaded model got (:func:`app.services.context_info.context_details`).
The Engines button only asks for Settings → Engines (:attr:`ModelTab.engines_requested`): engines are
saved as they are edited there, not on OK. The seed is the one value checked here: text that is not
a number cannot be put in a ``Settings``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from app.services.context_info import context_details
from app.services.settings import AUTO_CONTEXT, CONTEXT_RANGE, MAX_TOKENS_RANGE, Settings, context_key
from engine.protocol import REPEAT_WINDOW, ContextReport
from ui.views.settings.form import FieldRows, SettingsTab, double_spin, spin

SEED_MESSAGE = "Seed must be a whole number, or empty for a random seed."
NO_MODEL_DETAILS = "No model is loaded yet."
NO_MODEL_FILE = "The current model's file was not found, so its context cannot be set."
SUGGESTED_CONTEXT = 8192  # what the tokens box offers when the context is Auto and no model is loaded


class ModelTab(SettingsTab):
    title = "Model"
    fields = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "seed", "max_tokens", "contexts")
    engines_requested = Signal()  # "Engines…": the remote engines' own dialog

    def __init__(self, rows: FieldRows, base: Settings, model_path: str | None, context: ContextReport | None) -> None:
        super().__init__(rows)
        self._base, self._model_path, self._context = base, model_path, context
        self._engines()
        self._answers()
        self._context_rows()
        self.finish()

    def _engines(self) -> None:
        form = self.group("Engines")
        line = QWidget()
        row = QHBoxLayout(line)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("This computer answers, or a remote OpenAI-compatible server you add (vLLM, "
                             "llama.cpp's server, Ollama, another Hearth).", wordWrap=True), 1)
        self.engines_button = QPushButton("Eng&ines…", objectName="open_engines")
        self.engines_button.setAutoDefault(False)
        self.engines_button.clicked.connect(self.engines_requested)
        row.addWidget(self.engines_button)
        form.addRow(line)

    def _answers(self) -> None:
        form = self.group("Answers")
        self.temperature = double_spin("temperature", 0.0, 10.0, 0.05)
        self.top_k = spin("top_k", 0, 1_000_000)
        self.top_p = double_spin("top_p", 0.0, 1.0, 0.01)
        self.min_p = double_spin("min_p", 0.0, 1.0, 0.01)
        self.repeat_penalty = double_spin("repeat_penalty", 0.5, 5.0, 0.05, decimals=2)
        self.repeat_penalty.setToolTip(f"Makes the words of the answer's last {REPEAT_WINDOW} tokens less likely, so "
                                       "it does not go round in circles: 1 is off, 1.1 stops most loops.")
        self.seed = QLineEdit(objectName="seed", placeholderText="Random")
        self.max_tokens = spin("max_tokens", *MAX_TOKENS_RANGE)
        self.rows.row(form, "&Temperature:", "temperature", self.temperature)
        self.rows.row(form, "Top-&k:", "top_k", self.top_k)
        self.rows.row(form, "Top-&p:", "top_p", self.top_p)
        self.rows.row(form, "&Min-p:", "min_p", self.min_p)
        self.rows.row(form, "&Repeat penalty:", "repeat_penalty", self.repeat_penalty)
        self.rows.row(form, "&Seed:", "seed", self.seed)
        self.rows.row(form, "Max t&okens:", "max_tokens", self.max_tokens)

    def _context_rows(self) -> None:
        form = self.group("Context of the current model")
        self.context_auto = QCheckBox("&Auto", objectName="context_auto")
        self.context_auto.setToolTip("The longest context the memory budget holds, up to what the model was "
                                     "trained on")
        self.context_tokens = spin("context_tokens", 1, CONTEXT_RANGE[1])
        self.context_tokens.setSuffix(" tokens")
        self.context_tokens.setSingleStep(1024)
        self.context_tokens.setGroupSeparatorShown(True)
        details = context_details(self._context) if self._context is not None else NO_MODEL_DETAILS
        self.context_details = QLabel(details, objectName="context_details", wordWrap=True)
        self.rows.row(form, "Conte&xt:", "contexts", self.context_auto, self.context_tokens)
        form.addRow("", self.context_details)
        if self._model_path is None:
            for widget in (self.context_auto, self.context_tokens):
                widget.setEnabled(False)
                widget.setToolTip(NO_MODEL_FILE)
        self.context_auto.toggled.connect(self._update_context_enabled)

    def fill(self, s: Settings) -> None:
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k)
        self.top_p.setValue(s.top_p)
        self.min_p.setValue(s.min_p)
        self.repeat_penalty.setValue(s.repeat_penalty)
        self.seed.setText("" if s.seed is None else str(s.seed))
        self.max_tokens.setValue(s.max_tokens)
        tokens = s.context_for(self._model_path) if self._model_path is not None else AUTO_CONTEXT
        self.context_auto.setChecked(tokens == AUTO_CONTEXT)
        self.context_tokens.setValue(tokens or (self._context.n_ctx if self._context else SUGGESTED_CONTEXT))
        self._update_context_enabled()

    def values(self) -> dict[str, Any]:
        return {"temperature": self.temperature.value(), "top_k": self.top_k.value(), "top_p": self.top_p.value(),
                "min_p": self.min_p.value(), "repeat_penalty": self.repeat_penalty.value(),
                "seed": self.seed_value()[0], "max_tokens": self.max_tokens.value(), "contexts": self._contexts()}

    def seed_value(self) -> tuple[int | None, str | None]:
        """The seed the text stands for (None = random), or a message when it is not a number."""
        text = self.seed.text().strip()
        if not text:
            return None, None
        try:
            return int(text), None
        except ValueError:
            return None, SEED_MESSAGE

    def _contexts(self) -> dict[str, int]:
        """The settings' contexts with the current model's as the form says (Auto: no entry)."""
        contexts = dict(self._base.contexts)
        if self._model_path is not None:
            key = context_key(self._model_path)
            contexts.pop(key, None)
            if not self.context_auto.isChecked():
                contexts[key] = self.context_tokens.value()
        return contexts

    def focus_widget(self, field: str) -> QWidget:
        return self.context_tokens if field == "contexts" else getattr(self, field)

    def _update_context_enabled(self) -> None:
        self.context_tokens.setEnabled(self._model_path is not None and not self.context_auto.isChecked())
