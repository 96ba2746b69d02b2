"""The Settings dialog: six tabs (Chat, Model, Performance, Privacy, Tools, Advanced) that edit a copy of
:class:`app.services.settings.Settings`.

Design:

* The dialog holds no rules of its own. On OK it builds a :class:`Settings` from the tabs
  (:meth:`SettingsDialog.form_settings`) and asks :func:`app.services.settings.validate_settings`; the only
  check done here is the seed text, which cannot be put in a ``Settings`` when it is not a number.
* Each tab (:mod:`ui.views.settings.form`) builds its rows with the dialog's one :class:`FieldRows`,
  so every field has a hidden ``error_<field>`` label under it. While any message is shown the
  dialog stays open, the tabs with a message have red titles, and the first invalid field (in tab
  order) is shown and gets focus.
* Fields the form does not edit (``model``, ``schema_version``, ...) are carried over unchanged, and
  their messages are not shown here: the model is chosen elsewhere.
* While the dialog is open, a local API server that fails to start says why under its on/off box,
  on the Privacy tab, which is brought forward (:meth:`SettingsDialog.show_api_server_problem`).
* The theme and the text size apply when the dialog is accepted (:func:`ui.theme.apply_appearance`);
  the other settings apply where the window takes them (the next answer, the next load).
* Widgets are created in tab order, so Tab follows the form within a tab (Ctrl+Tab changes tabs);
  Enter presses OK (the Browse buttons are not auto-default) and Esc cancels.
"""

from __future__ import annotations

import msgspec
from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QDialogButtonBox, QLabel, QTabWidget, QVBoxLayout, QWidget

from app.services.sampling_defaults import ResolvedSampling
from app.services.settings import Settings, validate_settings
from engine.protocol import ContextReport
from ui.theme import apply_appearance, colour
from ui.views.settings.advanced_tab import AdvancedTab
from ui.views.settings.chat_tab import ChatTab
from ui.views.settings.form import FieldRows, SettingsTab, scrolling
from ui.views.settings.model_tab import ModelTab
from ui.views.settings.performance_tab import PerformanceTab
from ui.views.settings.privacy_tab import PrivacyTab
from ui.views.settings.tools_tab import ToolsTab

SCREEN_EDGE = 40  # px kept free around the dialog for the window manager's frame
TAB_HAS_ERRORS = "A setting on this tab needs to be changed."
OUTSIDE_NOTE = ("Another program changed these settings while this window was open, and Hearth uses its values "
                "now. OK saves what this window shows over them; Cancel keeps the other program's.")


class SettingsDialog(QDialog):
    engines_requested = Signal()  # "Engines…": the remote engines' own dialog

    def __init__(self, settings: Settings, parent: QWidget | None = None, *, npu_available: bool = False,
                 npu_label: str = "NPU", model_path: str | None = None, context: ContextReport | None = None,
                 sampling: ResolvedSampling | None = None) -> None:
        """``model_path``: the current model's file (None: its context cannot be set); ``context``:
        what the loaded model got (None while none is loaded); ``sampling``: the model's own sampling
        (None: read from ``model_path``), shown where the user set none."""
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.result_settings: Settings | None = None
        self._base = settings
        self._npu_available = npu_available
        self.rows = FieldRows()
        self.model_tab = ModelTab(self.rows, settings, model_path, context, sampling)
        self.privacy_tab = PrivacyTab(self.rows)
        self.tools_tab = ToolsTab(self.rows)
        self.tab_list: tuple[SettingsTab, ...] = (
            ChatTab(self.rows), self.model_tab,
            PerformanceTab(self.rows, npu_available=npu_available, npu_label=npu_label), self.privacy_tab,
            self.tools_tab, AdvancedTab(self.rows))
        self.form_fields = tuple(field for tab in self.tab_list for field in tab.fields)
        self.tabs = QTabWidget(objectName="settings_tabs")
        screen = QGuiApplication.primaryScreen()
        room = int(screen.availableGeometry().height() * 0.7) if screen is not None else 700
        for tab in self.tab_list:
            tab.setObjectName(f"settings_tab_{tab.title.lower()}")
            self.tabs.addTab(scrolling(tab, room), tab.title)  # the buttons stay in view on a short screen
        layout = QVBoxLayout(self)
        self.outside_note = QLabel(OUTSIDE_NOTE, objectName="outside_note", wordWrap=True, visible=False)
        layout.addWidget(self.outside_note)
        layout.addWidget(self.tabs, stretch=1)
        layout.addWidget(self._button_box())
        self.model_tab.engines_requested.connect(self.engines_requested)
        # what the window and tests reach for by name
        self.api_group = self.privacy_tab.api_group
        self.engines_button = self.model_tab.engines_button
        self.context_details = self.model_tab.context_details
        self.device_policy = self.tab_list[2].device_policy
        self._fill(settings)
        self.resize(self._fitting_size())

    def _fitting_size(self) -> QSize:
        """As large as the tabs would like, within the screen's free area (a tab scrolls up and down
        when the screen is short), and never smaller than the widest field needs."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return self.sizeHint()
        frame = QSize(SCREEN_EDGE, SCREEN_EDGE)  # the title bar and borders the window manager adds
        room = screen.availableGeometry().size() - frame
        return self.sizeHint().boundedTo(room).expandedTo(self.minimumSizeHint())

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
        for tab in self.tab_list:
            tab.fill(s)

    def form_settings(self) -> Settings:
        """What the form says now; an unreadable seed reads as None (see :meth:`form_errors`)."""
        values = {name: value for tab in self.tab_list for name, value in tab.values().items()}
        return msgspec.structs.replace(self._base, **values)

    def form_errors(self) -> dict[str, str]:
        """Messages for the fields this form edits, in form order."""
        errors = validate_settings(self.form_settings(), npu_available=self._npu_available)
        seed_error = self.model_tab.seed_value()[1]
        if seed_error:
            errors["seed"] = seed_error
        return {name: errors[name] for name in self.form_fields if name in errors}

    # --- reacting to the user -------------------------------------------------------------------

    def _show_errors(self, errors: dict[str, str]) -> None:
        self.rows.show(errors)
        for index, tab in enumerate(self.tab_list):
            wrong = any(field in errors for field in tab.fields)
            self.tabs.tabBar().setTabTextColor(index, colour("bad") if wrong else QColor())  # red in the theme
            self.tabs.setTabToolTip(index, TAB_HAS_ERRORS if wrong else "")

    def _tab_of(self, field: str) -> SettingsTab:
        return next(tab for tab in self.tab_list if field in tab.fields)

    def show_field(self, field: str) -> QWidget:
        """Bring ``field``'s tab forward; its widget."""
        tab = self._tab_of(field)
        self.tabs.setCurrentIndex(self.tab_list.index(tab))
        return tab.focus_widget(field)

    def accept(self) -> None:
        errors = self.form_errors()
        self._show_errors(errors)
        if errors:
            self.show_field(next(iter(errors))).setFocus()
            return
        self.result_settings = self.form_settings()
        self._apply_appearance(self.result_settings)
        super().accept()

    def _apply_appearance(self, new: Settings) -> None:
        app = QApplication.instance()
        if (new.theme, new.text_size) != (self._base.theme, self._base.text_size) and isinstance(app, QApplication):
            apply_appearance(app, theme=new.theme, text_size=new.text_size)

    def show_api_server_problem(self, text: str) -> None:
        """Why the local API server could not start (or stopped), under its on/off box."""
        self.show_field("api_server")
        label = self.rows.errors["api_server"]
        label.setText(text)
        label.setVisible(True)

    def changed_outside(self, new: Settings) -> None:
        """Another program saved ``new`` while the dialog is open: the fields the form does not edit
        are taken from it, the form keeps what the user sees and typed, and the dialog says so."""
        self._base = new
        self.outside_note.setVisible(True)

    def restore_defaults(self) -> None:
        self._fill(Settings())
        self._show_errors({})
