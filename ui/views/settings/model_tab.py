"""Settings → Model: which engine answers, how answers are sampled, and the current model's context.

Each sampling value says where it comes from, for the model shown (``sampling``: the loaded or chosen
model's own defaults): :mod:`ui.views.settings.sampling_sources`. The context is said in plain words,
the technical terms in a tooltip (:mod:`ui.views.settings.context_words`).

The context is the current model's only (``model_path``, its entry in ``Settings.contexts``; Auto
removes the entry), with what the loaded model got.
The Engines button only asks for Settings → Engines (:attr:`ModelTab.engines_requested`): engines are
saved as they are edited there, not on OK. The seed is the one value checked here: text that is not
a number cannot be put in a ``Settings``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from app.services.sampling_defaults import ResolvedSampling, model_sampling
from app.services.settings import AUTO_CONTEXT, CONTEXT_RANGE, MAX_TOKENS_RANGE, Settings, context_key
from engine.protocol import DRY_MULTIPLIER_RANGE, MAX_TOKENS, REPEAT_WHOLE_ANSWER, REPEAT_WINDOW, ContextReport
from ui.views.settings.context_words import context_terms, context_words
from ui.views.settings.form import FieldRows, SettingsTab, double_spin, note, spin
from ui.views.settings.sampling_sources import SamplingSources

SEED_MESSAGE = "Seed must be a whole number, or empty for a random seed."
NO_MODEL_DETAILS = "No model is loaded yet."
NO_MODEL_FILE = "The current model's file was not found, so how much it reads at once cannot be set."
WHOLE_ANSWER = "Whole answer"  # the repeat window's -1
SUGGESTED_CONTEXT = 8192  # what the tokens box offers when the context is Auto and no model is loaded


class ModelTab(SettingsTab):
    title = "Model"
    fields = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "seed",
              "max_tokens", "contexts")
    engines_requested = Signal()  # "Engines…": the remote engines' own dialog

    def __init__(self, rows: FieldRows, base: Settings, model_path: str | None, context: ContextReport | None,
                 sampling: ResolvedSampling | None = None) -> None:
        """``sampling``: the shown model's own sampling (None: read from ``model_path``'s file)."""
        super().__init__(rows)
        self._base, self._model_path, self._context = base, model_path, context
        self._sampling = sampling if sampling is not None else model_sampling(model_path)
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
        self.repeat_penalty.setToolTip("Makes the words the answer used lately (see Repeat window) less likely, so "
                                       "it does not go round in circles: 1 is off, 1.1 stops most loops.")
        self.repeat_last_n = spin("repeat_last_n", REPEAT_WHOLE_ANSWER, MAX_TOKENS)
        self.repeat_last_n.setSpecialValueText(WHOLE_ANSWER)  # shown for -1, the lowest value
        self.repeat_last_n.setSuffix(" tokens")
        self.repeat_last_n.setToolTip("How many of the answer's last tokens the repeat penalty looks at: 0 switches "
                                      f"it off, {WHOLE_ANSWER} (below 0) looks at all of it. Technical name: "
                                      f"repeat_last_n (llama.cpp's penalty_last_n); Hearth's default {REPEAT_WINDOW}.")
        self.dry_multiplier = double_spin("dry_multiplier", *DRY_MULTIPLIER_RANGE, 0.1, decimals=2)
        self.dry_multiplier.setToolTip("Makes the answer less likely to write again a run of words it already wrote "
                                       "(the same phrase or list line over and over): 0 is off. Technical name: "
                                       "dry_multiplier (llama.cpp's DRY sampler).")
        self.seed = QLineEdit(objectName="seed", placeholderText="Random")
        self.max_tokens = spin("max_tokens", *MAX_TOKENS_RANGE)
        names = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "dry_multiplier")
        self.sources = SamplingSources({name: getattr(self, name) for name in names}, self._sampling)
        model = Path(self._model_path).name if self._model_path else "a model on a remote engine or none"
        form.addRow(note(f"For {model}: a value you do not change follows the model's own."))
        for caption, name in (("&Temperature:", "temperature"), ("Top-&k:", "top_k"), ("Top-&p:", "top_p"),
                              ("&Min-p:", "min_p"), ("&Repeat penalty:", "repeat_penalty"),
                              ("Repeat &window:", "repeat_last_n"), ("P&hrase penalty:", "dry_multiplier")):
            self.rows.row(form, caption, name, getattr(self, name), self.sources.labels[name])
        form.addRow("", self.sources.reset_button)
        self.rows.row(form, "&Seed:", "seed", self.seed)
        self.rows.row(form, "Max t&okens:", "max_tokens", self.max_tokens)

    def _context_rows(self) -> None:
        form = self.group("How much this model can read at once")
        self.context_auto = QCheckBox("&Auto", objectName="context_auto")
        self.context_auto.setToolTip("As much as this computer's memory holds, up to what the model was made to "
                                     "read (its context window)")
        self.context_tokens = spin("context_tokens", 1, CONTEXT_RANGE[1])
        self.context_tokens.setSuffix(" tokens")
        self.context_tokens.setSingleStep(1024)
        self.context_tokens.setGroupSeparatorShown(True)
        details = context_words(self._context) if self._context is not None else NO_MODEL_DETAILS
        self.context_details = QLabel(details, objectName="context_details", wordWrap=True)
        if self._context is not None:
            self.context_details.setToolTip(context_terms(self._context))
        self.rows.row(form, "Reads at &once:", "contexts", self.context_auto, self.context_tokens)
        form.addRow("", self.context_details)
        if self._model_path is None:
            for widget in (self.context_auto, self.context_tokens):
                widget.setEnabled(False)
                widget.setToolTip(NO_MODEL_FILE)
        self.context_auto.toggled.connect(self._update_context_enabled)

    def fill(self, s: Settings) -> None:
        self.sources.fill(s)
        self.seed.setText("" if s.seed is None else str(s.seed))
        self.max_tokens.setValue(s.max_tokens)
        tokens = s.context_for(self._model_path) if self._model_path is not None else AUTO_CONTEXT
        self.context_auto.setChecked(tokens == AUTO_CONTEXT)
        self.context_tokens.setValue(tokens or (self._context.n_ctx if self._context else SUGGESTED_CONTEXT))
        self._update_context_enabled()

    def values(self) -> dict[str, Any]:
        return {**self.sources.values(), "seed": self.seed_value()[0], "max_tokens": self.max_tokens.value(),
                "contexts": self._contexts()}

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
