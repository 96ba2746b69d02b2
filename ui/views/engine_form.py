"""Adding or editing one remote engine: its name, address, API key, model and context, with a
"Fetch models" and a "Test" that ask the server itself.

Design:

* The form checks what it can as the user types: the address through
  :func:`app.engine_clients.remote.spec.check_url`, whose warning (plain ``http://`` to this computer or a
  private network) shows under it and whose refusal (plain ``http://`` over the internet) shows in
  red and keeps OK from saving. Everything else is the registry's to refuse
  (:meth:`~app.services.engines.EngineRegistry.add`): its sentence shows in the form, which stays open.
* The key field is a password field. Where it goes is said before it is typed
  (:func:`~app.services.engine_keys.secret_store`); without a secret store the form offers to keep it
  in a private file, else it lasts for the session only. Editing an engine with the field left
  empty keeps the key it has.
* "Fetch models" fills the model list from the server's ``/v1/models`` and, when the server says
  how long a model's context is, the context box; otherwise the user fills it (default
  :data:`~app.engine_clients.remote.spec.DEFAULT_CONTEXT`). Fetching and testing run off the GUI thread
  (:class:`ui.remote_engines.RemoteWork`); their results reach a form that is still open only.
"""

from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton,
    QSpinBox, QVBoxLayout, QWidget,
)

from app.services.engine_keys import KeyProblem
from app.services.engines import EngineEntry, EngineProblem, EngineRegistry, secret_store
from app.engine_clients.remote.spec import DEFAULT_CONTEXT, RemoteEngine, UrlProblem, check_url
from ui.remote_engines import RemoteWork
from ui.remote_text import probe_text, sentence
from ui.theme import set_tone

ERROR_TONE, WARNING_TONE = "bad", "caution"  # ui.theme.set_tone: coloured in light and dark
MAX_CONTEXT = 16 * 1024 * 1024
FROM_SERVER = "from the server"  # the context box at 0: what the server says, when the engine is used
KEEP_KEY = "(unchanged; type to replace it)"
FORM_WIDTH = 560  # wide enough that the notes under the fields wrap onto two or three lines


def _note(name: str, tone: str = "") -> QLabel:
    label = QLabel(objectName=name, wordWrap=True)
    if tone:
        set_tone(label, tone)
    label.hide()
    return label


def _button(text: str, name: str) -> QPushButton:
    button = QPushButton(text, objectName=name)
    button.setAutoDefault(False)  # Enter means OK
    return button


class EngineForm(QDialog):
    """One engine's form. After OK, :attr:`saved` is the entry saved and :attr:`key_note` where its key went."""

    def __init__(self, registry: EngineRegistry, entry: EngineEntry | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit engine {entry.name}" if entry else "Add a remote engine")
        self.registry, self.editing = registry, entry
        self.saved: EngineEntry | None = None
        self.key_note = ""
        self.server_contexts: dict[str, int] = {}  # model id -> context, from the last fetch
        self.work = RemoteWork()
        self._open = True
        self._build()
        self._fill(entry)
        self.url.textChanged.connect(self._check_url)
        self.model.currentTextChanged.connect(self._model_changed)
        self.fetch.clicked.connect(self.fetch_models)
        self.test.clicked.connect(self.run_test)

    # -- building --------------------------------------------------------------------------------

    def _build(self) -> None:
        form = QFormLayout()
        self.name = QLineEdit(objectName="engine_name", placeholderText="gpu-box")
        self.url = QLineEdit(objectName="engine_url", placeholderText="https://gpu.example.com/v1")
        self.url_note = _note("engine_url_note")
        self.key = QLineEdit(objectName="engine_key", echoMode=QLineEdit.EchoMode.Password)
        self.key_place = _note("engine_key_place")
        self.key_in_file = QCheckBox("Keep it in a private file on this computer (readable only by you)",
                                     objectName="engine_key_in_file")
        self.model = QComboBox(objectName="engine_model", editable=True)
        self.model.lineEdit().setPlaceholderText("the server's first model")
        self.fetch = _button("Fetch models", "engine_fetch")
        self.context = QSpinBox(objectName="engine_context", minimum=0, maximum=MAX_CONTEXT, singleStep=1024,
                                specialValueText=FROM_SERVER, suffix=" tokens")
        self.context_note = _note("engine_context_note")
        self.test = _button("Test", "engine_test")
        self.test_result = _note("engine_test_result")
        self.error = _note("engine_error", ERROR_TONE)
        form.addRow("Name:", self.name)
        form.addRow("Address:", _column(self.url, self.url_note))
        form.addRow("API key:", _column(self.key, self.key_place, self.key_in_file))
        form.addRow("Model:", _row(self.model, self.fetch))
        form.addRow("Context:", _column(self.context, self.context_note))
        form.addRow("", _column(self.test, self.test_result))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        self.setMinimumWidth(FORM_WIDTH)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

    def _fill(self, entry: EngineEntry | None) -> None:
        self.name.setText(entry.name if entry else "")
        self.name.setReadOnly(entry is not None)  # a new name is a new engine: remove this one and add it
        self.url.setText(entry.url if entry else "")
        self.model.setEditText(entry.model if entry else "")
        self.context.setValue(entry.context if entry else DEFAULT_CONTEXT)
        if entry is not None and entry.key_kind != "none":
            self.key.setPlaceholderText(KEEP_KEY)
        usable, about = secret_store()
        self.key_in_file.setVisible(not usable)
        self.key_in_file.setChecked(entry is not None and entry.key_kind == "file")
        self._say(self.key_place, f"The key is kept in the system's secret store ({about})." if usable else
                  f"{sentence(about)} The key is kept only until Hearth quits, unless you allow a private file:")
        self._check_url()

    # -- what the form says ----------------------------------------------------------------------

    def _say(self, label: QLabel, text: str, tone: str | None = None) -> None:
        label.setText(text)
        if tone is not None:
            set_tone(label, tone)
        label.setVisible(bool(text))
        self.adjustSize()  # a wrapped note takes the lines it needs, never clipped

    def _check_url(self) -> str | None:
        """The address as it will be used, or None (and the reason under the field)."""
        text = self.url.text().strip()
        if not text:
            self._say(self.url_note, "")
            return None
        try:
            url, warning = check_url(text)
        except UrlProblem as exc:
            self._say(self.url_note, sentence(str(exc)), ERROR_TONE)
            return None
        self._say(self.url_note, sentence(warning) if warning else "", WARNING_TONE)
        return url

    def _model_changed(self, model: str) -> None:
        context = self.server_contexts.get(model.strip(), 0)
        if context:
            self.context.setValue(context)
            self._say(self.context_note, f"The server says {model} reads up to {context:,} tokens.", "")
        elif self.server_contexts:
            self._say(self.context_note, "The server does not say how long this model's context is; enter it.", "")

    # -- asking the server -----------------------------------------------------------------------

    def engine(self) -> RemoteEngine | None:
        """The engine as typed so far (with the key kept for it when the field is empty), or None
        with the reason shown."""
        url = self._check_url()
        if url is None:
            self._say(self.error, "" if self.url.text().strip() else "Type the engine's address first.")
            return None
        try:
            key = self._key()
        except KeyProblem as exc:
            self._say(self.error, sentence(str(exc)))
            return None
        self._say(self.error, "")
        return RemoteEngine(self.name.text().strip() or "new-engine", url, model=self.model.currentText().strip(),
                            context=self.context.value(), api_key=key or "")

    def _key(self) -> str | None:
        """The key typed, else (when editing) the one kept for the engine, else None."""
        typed = self.key.text().strip()
        if typed or self.editing is None or self.editing.key_kind == "none":
            return typed or None
        old = self.editing
        return self.registry.keys.read(old.name, old.key_kind, old.key_env)

    def fetch_models(self) -> None:
        engine = self.engine()
        if engine is None:
            return
        self.fetch.setEnabled(False)
        self._say(self.context_note, "Asking the server for its models…", "")
        self.work.fetch_models(engine, self._models_fetched, self._fetch_failed)

    def _models_fetched(self, models: list) -> None:
        if not self._open:
            return
        self.fetch.setEnabled(True)
        chosen = self.model.currentText().strip()
        self.server_contexts = {m.id: m.context for m in models}
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItems([m.id for m in models])
        self.model.blockSignals(False)
        self.model.setEditText(chosen if chosen in self.server_contexts or not models else models[0].id)
        self._model_changed(self.model.currentText())
        if not models:
            self._say(self.context_note, "The server lists no models; load one there first.")

    def _fetch_failed(self, text: str) -> None:
        if self._open:
            self.fetch.setEnabled(True)
            self._say(self.context_note, text, ERROR_TONE)

    def run_test(self) -> None:
        engine = self.engine()
        if engine is None:
            return
        self.test.setEnabled(False)
        self._say(self.test_result, "Testing…", "")
        self.work.test(engine, self._tested)

    def _tested(self, result) -> None:
        if not self._open:
            return
        self.test.setEnabled(True)
        text = probe_text(result)
        self._say(self.test_result, text, "" if result.ok else ERROR_TONE)

    # -- saving ----------------------------------------------------------------------------------

    def accept(self) -> None:
        """Save through the registry; a refusal is said here and the form stays open."""
        if self._check_url() is None:
            self._say(self.error, "" if self.url.text().strip() else "Type the engine's address.")
            return
        entry = EngineEntry(self.name.text().strip(), self.url.text().strip(), model=self.model.currentText().strip(),
                            context=self.context.value())
        if self.editing is None and self._taken(entry.name):
            self._say(self.error, f"There is already an engine called {entry.name}; edit it, or choose another name.")
            return
        try:
            key = self._key()
            if self.editing is not None and not self.key.text().strip():
                entry = dataclasses.replace(entry, key_env=self.editing.key_env)
            self.key_note = self.registry.add(entry, key, key_in_file=self.key_in_file.isChecked(),
                                              replace=self.editing is not None)
        except (EngineProblem, KeyProblem) as exc:
            self._say(self.error, sentence(str(exc)))
            return
        self.saved = self.registry.get(entry.name)
        super().accept()

    def _taken(self, name: str) -> bool:
        return any(e.name.lower() == name.lower() for e in self.registry.entries())

    def done(self, result: int) -> None:
        self._open = False  # a fetch or test still running is not shown any more
        super().done(result)


def _column(*widgets: QWidget) -> QWidget:
    cell = QWidget()
    layout = QVBoxLayout(cell)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget)
    return cell


def _row(*widgets: QWidget) -> QWidget:
    cell = QWidget()
    layout = QHBoxLayout(cell)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget, 1 if isinstance(widget, QComboBox) else 0)
    return cell
