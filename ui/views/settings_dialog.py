"""The Settings dialog: a grouped form that edits a copy of :class:`app.services.settings.Settings`.

Design:

* The dialog holds no rules of its own. On OK it builds a :class:`Settings` from the form
  (:meth:`SettingsDialog.form_settings`) and asks :func:`app.services.settings.validate_settings`; the only
  check done here is the seed text, which cannot be put in a ``Settings`` when it is not a number.
* Each input widget's ``objectName`` is its Settings field name, and each has a hidden
  ``error_<field>`` label under it that shows that field's message. While any message is shown
  the dialog stays open and the first invalid field gets focus.
* Fields the form does not edit (``model``, ``schema_version``) are carried over unchanged, and
  their messages are not shown here: the model is chosen elsewhere.
* The Model group edits the context of the current model only (``model_path``, its entry in
  ``Settings.contexts``; Auto removes the entry), and shows what the loaded model got
  (:func:`app.services.context_info.context_details`). Its number boxes allow more than the rules
  do, so an out-of-range value gets the rules' message rather than a silent clamp.
* The Local API server group (:mod:`ui.views.api_server_group`) builds its rows with this
  dialog's row builder, so its messages show and take focus like every other field's. While the
  dialog is open, a server that fails to start says why under its on/off box
  (:meth:`SettingsDialog.show_api_server_problem`).
* The Engines group only opens Settings → Engines (:mod:`ui.views.engines_dialog`, through
  :attr:`SettingsDialog.engines_requested`): engines are saved as they are edited there, not on OK.
* Widgets are created in form order, so Tab follows the form; Enter presses OK (the Browse
  buttons are not auto-default) and Esc cancels.
"""

from __future__ import annotations

import msgspec
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.services.context_info import context_details
from app.services.settings import (
    AUTO_CONTEXT,
    CONTEXT_RANGE,
    DRAFT_MAX_RANGE,
    MAX_TOKENS_RANGE,
    SNAPSHOT_BUDGET_GIB_RANGE,
    Settings,
    context_key,
    validate_settings,
)
from engine.protocol import ContextReport
from ui.theme import set_tone
from ui.views.api_server_group import ApiServerGroup

SEED_MESSAGE = "Seed must be a whole number, or empty for a random seed."
NO_MODEL_DETAILS = "No model is loaded yet."
NO_MODEL_FILE = "The current model's file was not found, so its context cannot be set."
SUGGESTED_CONTEXT = 8192  # what the tokens box offers when the context is Auto and no model is loaded
DRAFT_CHOICES = (("auto", "Auto"), ("off", "Off"), ("lookup", "Prompt lookup"), ("mtp", "MTP heads"), ("model", "Draft model"))
DEVICE_CHOICES = (("auto", "Auto"), ("cpu", "CPU"), ("npu", "NPU"))
# Settings field -> the form field whose error label and focus stand for it, in form order.
FORM_FIELDS = (
    "temperature", "top_k", "top_p", "min_p", "seed", "max_tokens",
    "draft", "draft_max", "device_policy", "contexts", "kv_cache_8bit", "memory_budget_percent",
    "snapshot_budget_gib", "data_folder", "highlight_drafts", "api_server", "api_server_port", "api_server_key",
    "api_server_lan",
)  # fmt: skip


def _spin(name: str, low: int, high: int) -> QSpinBox:
    box = QSpinBox(objectName=name)
    box.setRange(low, high)
    return box


def _double_spin(name: str, low: float, high: float, step: float, decimals: int = 3) -> QDoubleSpinBox:
    box = QDoubleSpinBox(objectName=name)
    box.setDecimals(decimals)
    box.setRange(low, high)
    box.setSingleStep(step)
    return box


def _combo(name: str, choices: tuple[tuple[str, str], ...]) -> QComboBox:
    box = QComboBox(objectName=name)
    for value, text in choices:
        box.addItem(text, value)
    return box


def _browse_button() -> QPushButton:
    button = QPushButton("Browse…")
    button.setAutoDefault(False)  # Enter still means OK when the button has focus
    return button


class SettingsDialog(QDialog):
    engines_requested = Signal()  # "Engines…": the remote engines' own dialog

    def __init__(self, settings: Settings, parent: QWidget | None = None, *, npu_available: bool = False,
                 npu_label: str = "NPU", model_path: str | None = None, context: ContextReport | None = None) -> None:
        """``model_path``: the current model's file (None: its context cannot be set); ``context``:
        what the loaded model got (None while none is loaded)."""
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.result_settings: Settings | None = None
        self._base = settings
        self._npu_available = npu_available
        self._npu_label = npu_label
        self._model_path = model_path
        self._context = context
        self._errors: dict[str, QLabel] = {}
        layout = QVBoxLayout(self)
        form = QWidget()
        groups = QVBoxLayout(form)
        groups.setContentsMargins(0, 0, 0, 0)
        for group in (self._engines_group(), self._sampling_group(), self._drafting_group(), self._device_group(),
                      self._model_group(), self._storage_group(), self._display_group(),
                      self._api_server_group()):  # fmt: skip
            groups.addWidget(group)
        layout.addWidget(_scrolling(form), stretch=1)  # the buttons stay in view on a short screen
        layout.addWidget(self._button_box())
        self.draft_kind.currentIndexChanged.connect(self._update_draft_path_enabled)
        self.context_auto.toggled.connect(self._update_context_enabled)
        self._fill(settings)

    # --- building the form ----------------------------------------------------------------------

    def _row(self, form: QFormLayout, label: str, field: str, *widgets: QWidget) -> None:
        """One labelled row: the widgets side by side, with the field's error label underneath."""
        error = QLabel(objectName=f"error_{field}", wordWrap=True, visible=False)
        set_tone(error, "bad")  # red in light and dark (ui.theme)
        self._errors[field] = error
        cell = QWidget()
        column = QVBoxLayout(cell)
        column.setContentsMargins(0, 0, 0, 0)
        line = QHBoxLayout()
        for widget in widgets:
            line.addWidget(widget, stretch=1 if isinstance(widget, QLineEdit) else 0)
        column.addLayout(line)
        column.addWidget(error)
        caption = QLabel(label)
        caption.setBuddy(widgets[0])
        form.addRow(caption, cell)

    def _sampling_group(self) -> QGroupBox:
        group, form = QGroupBox("Sampling"), QFormLayout()
        self.temperature = _double_spin("temperature", 0.0, 10.0, 0.05)
        self.top_k = _spin("top_k", 0, 1_000_000)
        self.top_p = _double_spin("top_p", 0.0, 1.0, 0.01)
        self.min_p = _double_spin("min_p", 0.0, 1.0, 0.01)
        self.seed = QLineEdit(objectName="seed", placeholderText="Random")
        self.max_tokens = _spin("max_tokens", *MAX_TOKENS_RANGE)
        self._row(form, "&Temperature:", "temperature", self.temperature)
        self._row(form, "Top-&k:", "top_k", self.top_k)
        self._row(form, "Top-&p:", "top_p", self.top_p)
        self._row(form, "&Min-p:", "min_p", self.min_p)
        self._row(form, "&Seed:", "seed", self.seed)
        self._row(form, "Max t&okens:", "max_tokens", self.max_tokens)
        group.setLayout(form)
        return group

    def _drafting_group(self) -> QGroupBox:
        group, form = QGroupBox("Drafting"), QFormLayout()
        self.draft_kind = _combo("draft_kind", DRAFT_CHOICES)
        self.draft_path = QLineEdit(objectName="draft_path", placeholderText="A .gguf draft model")
        self.draft_browse = _browse_button()
        self.draft_browse.clicked.connect(self._browse_draft_model)
        self.draft_max = _spin("draft_max", *DRAFT_MAX_RANGE)
        form.addRow(QLabel("&Drafting:", buddy=self.draft_kind), self.draft_kind)
        self._row(form, "Draft mode&l:", "draft", self.draft_path, self.draft_browse)
        self._row(form, "Max dra&ft length:", "draft_max", self.draft_max)
        group.setLayout(form)
        return group

    def _device_group(self) -> QGroupBox:
        group, form = QGroupBox("Device"), QFormLayout()
        self.device_policy = _combo("device_policy", DEVICE_CHOICES)
        self.device_policy.setItemText(2, self._npu_label if self._npu_available else "NPU (not found on this machine)")
        self._row(form, "D&evice:", "device_policy", self.device_policy)
        group.setLayout(form)
        return group

    def _model_group(self) -> QGroupBox:
        group, form = QGroupBox("Model"), QFormLayout()
        self.context_auto = QCheckBox("&Auto", objectName="context_auto")
        self.context_auto.setToolTip("The longest context the memory budget holds, up to what the model was "
                                     "trained on")
        self.context_tokens = _spin("context_tokens", 1, CONTEXT_RANGE[1])
        self.context_tokens.setSuffix(" tokens")
        self.context_tokens.setSingleStep(1024)
        self.context_tokens.setGroupSeparatorShown(True)
        self.kv_cache_8bit = QCheckBox("&8-bit KV cache (about half the attention memory)", objectName="kv_cache_8bit")
        self.memory_budget_percent = _spin("memory_budget_percent", 1, 100)
        self.memory_budget_percent.setSuffix(" %")
        self.memory_budget_percent.setToolTip("The share of the memory available at load time an automatic "
                                              "context may fill, with the model")
        details = context_details(self._context) if self._context is not None else NO_MODEL_DETAILS
        self.context_details = QLabel(details, objectName="context_details", wordWrap=True)
        self._row(form, "Conte&xt:", "contexts", self.context_auto, self.context_tokens)
        form.addRow("", self.context_details)
        self._row(form, "", "kv_cache_8bit", self.kv_cache_8bit)
        self._row(form, "Memory b&udget for automatic context:", "memory_budget_percent", self.memory_budget_percent)
        if self._model_path is None:
            for widget in (self.context_auto, self.context_tokens):
                widget.setEnabled(False)
                widget.setToolTip(NO_MODEL_FILE)
        group.setLayout(form)
        return group

    def _engines_group(self) -> QGroupBox:
        group, row = QGroupBox("Engines"), QHBoxLayout()
        row.addWidget(QLabel("This computer answers, or a remote OpenAI-compatible server you add (vLLM, llama.cpp's "
                             "server, Ollama, another Hearth).", wordWrap=True), 1)
        self.engines_button = QPushButton("Eng&ines…", objectName="open_engines")
        self.engines_button.setAutoDefault(False)
        self.engines_button.clicked.connect(self.engines_requested)
        row.addWidget(self.engines_button)
        group.setLayout(row)
        return group

    def _storage_group(self) -> QGroupBox:
        group, form = QGroupBox("Storage"), QFormLayout()
        low, high = SNAPSHOT_BUDGET_GIB_RANGE
        self.snapshot_budget_gib = _double_spin("snapshot_budget_gib", low, high, 0.5, decimals=1)
        self.snapshot_budget_gib.setSuffix(" GiB")
        self.data_folder = QLineEdit(objectName="data_folder", placeholderText="The default data folder")
        self.data_browse = _browse_button()
        self.data_browse.clicked.connect(self._browse_data_folder)
        self._row(form, "Snapshot &budget:", "snapshot_budget_gib", self.snapshot_budget_gib)
        self._row(form, "Data f&older:", "data_folder", self.data_folder, self.data_browse)
        form.addRow("", QLabel("A new data folder is used after Hearth restarts.", wordWrap=True))
        group.setLayout(form)
        return group

    def _display_group(self) -> QGroupBox:
        group, form = QGroupBox("Display"), QFormLayout()
        self.highlight_drafts = QCheckBox("&Highlight text that came from accepted drafts", objectName="highlight_drafts")
        self._row(form, "", "highlight_drafts", self.highlight_drafts)
        group.setLayout(form)
        return group

    def _api_server_group(self) -> ApiServerGroup:
        self.api_group = ApiServerGroup(self._row)
        return self.api_group

    def _button_box(self) -> QDialogButtonBox:
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        restore = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.setAutoDefault(False)
        restore.clicked.connect(self.restore_defaults)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setDefault(True)
        return buttons

    # --- form <-> Settings ----------------------------------------------------------------------

    def _fill(self, s: Settings) -> None:
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k)
        self.top_p.setValue(s.top_p)
        self.min_p.setValue(s.min_p)
        self.seed.setText("" if s.seed is None else str(s.seed))
        self.max_tokens.setValue(s.max_tokens)
        kind, _, path = s.draft.partition(":")
        self.draft_kind.setCurrentIndex(max(self.draft_kind.findData(kind), 0))
        self.draft_path.setText(path if kind == "model" else "")
        self.draft_max.setValue(s.draft_max)
        self.device_policy.setCurrentIndex(max(self.device_policy.findData(s.device_policy), 0))
        tokens = s.context_for(self._model_path) if self._model_path is not None else AUTO_CONTEXT
        self.context_auto.setChecked(tokens == AUTO_CONTEXT)
        self.context_tokens.setValue(tokens or (self._context.n_ctx if self._context else SUGGESTED_CONTEXT))
        self.kv_cache_8bit.setChecked(s.kv_cache_8bit)
        self.memory_budget_percent.setValue(s.memory_budget_percent)
        self.snapshot_budget_gib.setValue(s.snapshot_budget_gib)
        self.data_folder.setText(s.data_folder)
        self.highlight_drafts.setChecked(s.highlight_drafts)
        self.api_group.fill(s)
        self._update_draft_path_enabled()
        self._update_context_enabled()

    def _contexts(self) -> dict[str, int]:
        """The settings' contexts with the current model's as the form says (Auto: no entry)."""
        contexts = dict(self._base.contexts)
        if self._model_path is not None:
            key = context_key(self._model_path)
            contexts.pop(key, None)
            if not self.context_auto.isChecked():
                contexts[key] = self.context_tokens.value()
        return contexts

    def _seed_value(self) -> tuple[int | None, str | None]:
        """The seed the text stands for (None = random), or a message when it is not a number."""
        text = self.seed.text().strip()
        if not text:
            return None, None
        try:
            return int(text), None
        except ValueError:
            return None, SEED_MESSAGE

    def _draft_text(self) -> str:
        kind = self.draft_kind.currentData()
        return f"model:{self.draft_path.text().strip()}" if kind == "model" else kind

    def form_settings(self) -> Settings:
        """What the form says now; an unreadable seed reads as None (see :meth:`form_errors`)."""
        return msgspec.structs.replace(
            self._base,
            temperature=self.temperature.value(),
            top_k=self.top_k.value(),
            top_p=self.top_p.value(),
            min_p=self.min_p.value(),
            seed=self._seed_value()[0],
            max_tokens=self.max_tokens.value(),
            draft=self._draft_text(),
            draft_max=self.draft_max.value(),
            device_policy=self.device_policy.currentData(),
            contexts=self._contexts(),
            kv_cache_8bit=self.kv_cache_8bit.isChecked(),
            memory_budget_percent=self.memory_budget_percent.value(),
            snapshot_budget_gib=self.snapshot_budget_gib.value(),
            data_folder=self.data_folder.text().strip(),
            highlight_drafts=self.highlight_drafts.isChecked(),
            **self.api_group.values(),
        )

    def form_errors(self) -> dict[str, str]:
        """Messages for the fields this form edits, in form order."""
        errors = validate_settings(self.form_settings(), npu_available=self._npu_available)
        seed_error = self._seed_value()[1]
        if seed_error:
            errors["seed"] = seed_error
        return {name: errors[name] for name in FORM_FIELDS if name in errors}

    # --- reacting to the user -------------------------------------------------------------------

    def _show_errors(self, errors: dict[str, str]) -> None:
        for name, label in self._errors.items():
            label.setText(errors.get(name, ""))
            label.setVisible(name in errors)

    def _focus_widget(self, field: str) -> QWidget:
        if field == "draft":
            return self.draft_path if self.draft_kind.currentData() == "model" else self.draft_kind
        if field == "contexts":
            return self.context_tokens
        if field.startswith("api_server"):
            return getattr(self.api_group, field)
        return getattr(self, field)

    def accept(self) -> None:
        errors = self.form_errors()
        self._show_errors(errors)
        if errors:
            self._focus_widget(next(iter(errors))).setFocus()
            return
        self.result_settings = self.form_settings()
        super().accept()

    def show_api_server_problem(self, text: str) -> None:
        """Why the local API server could not start (or stopped), under its on/off box."""
        label = self._errors["api_server"]
        label.setText(text)
        label.setVisible(True)

    def restore_defaults(self) -> None:
        self._fill(Settings())
        self._show_errors({})

    def _update_draft_path_enabled(self) -> None:
        wants_path = self.draft_kind.currentData() == "model"
        self.draft_path.setEnabled(wants_path)
        self.draft_browse.setEnabled(wants_path)

    def _update_context_enabled(self) -> None:
        self.context_tokens.setEnabled(self._model_path is not None and not self.context_auto.isChecked())

    def _browse_draft_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a draft model", self.draft_path.text(), "GGUF models (*.gguf)")
        if path:
            self.draft_path.setText(path)

    def _browse_data_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose the data folder", self.data_folder.text())
        if folder:
            self.data_folder.setText(folder)


def _scrolling(form: QWidget) -> QScrollArea:
    """``form`` in a frameless scroll area that opens as tall as the form, up to the screen's height."""
    area = QScrollArea(widgetResizable=True, frameShape=QFrame.Shape.NoFrame)
    area.setWidget(form)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    screen = QGuiApplication.primaryScreen()
    room = int(screen.availableGeometry().height() * 0.8) if screen is not None else 800
    area.setMinimumHeight(min(form.sizeHint().height(), room))
    area.setMinimumWidth(form.sizeHint().width() + area.verticalScrollBar().sizeHint().width())
    return area

