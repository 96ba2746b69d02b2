"""The main window's dialogs: Settings (and what a change to them sets off), Engines, Models,
the system check and About. A part of :class:`ui.main_window.MainWindow`, kept apart from the chat
it arranges.

Mixed into the window: uses its controller, model manager, banner, model picker, chat view, engine
choice, API server and ``save_settings``, and the attributes it sets to None at the start
(``settings_dialog``, ``engines_dialog``, ``models_dialog``, ``system_check``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.services.settings import LoadedSettings, Settings, SettingsError
from ui.theme import apply_appearance
from ui.remote_text import remote_name
from ui.views.about_dialog import AboutDialog, third_party_licences
from ui.views.engines_dialog import EnginesDialog
from ui.views.models_dialog import ModelsDialog
from ui.views.settings_dialog import SettingsDialog
from ui.views.system_check_dialog import SystemCheckDialog

# Settings the worker takes only when it loads a model (they travel in LoadModel): changing one reloads it.
OUTSIDE_NOTICE = "Settings were changed outside this window (by a hearth command or another program); they are in use now."
LOAD_TIME_SETTINGS = ("model", "draft_max", "draft_paths", "device_policy", "device_calibration", "contexts", "kv_cache_8bit",
                      "memory_budget_percent")


class WindowDialogs:
    """The dialogs the window opens, one of each at a time."""

    def open_system_check(self) -> SystemCheckDialog:
        """Show the system check; one at a time (it starts a worker of its own), raised if open."""
        if self.system_check is not None:
            self.system_check.raise_()
            self.system_check.activateWindow()
            return self.system_check
        dialog = SystemCheckDialog(self, cpu_variant=self.controller.bridge.client.cpu_variant)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(self._system_check_closed)  # every close goes through done()
        dialog.start()
        dialog.show()
        self.system_check = dialog
        return dialog

    def _system_check_closed(self, _result: int = 0) -> None:
        self.system_check = None

    def open_about(self) -> AboutDialog:
        dialog = AboutDialog(self.data_folder, self, licences=third_party_licences())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def open_models(self) -> None:
        if self.models_dialog is None:
            self.models_dialog = ModelsDialog(self.models, self)
        else:
            self.models.refresh()
        self.models_dialog.show()
        self.models_dialog.raise_()

    def open_models_on(self, ref: str, download: bool) -> None:
        """The Models page on one file ("id:QUANT", a model suggested for a document), downloading it if asked."""
        self.open_models()
        self.models_dialog.show_model(ref, download=download)

    # -- settings --------------------------------------------------------------------------------

    def open_settings(self) -> None:
        npu, loaded = self.controller.npu_kind(), self.controller.loaded
        dialog = SettingsDialog(self.controller.settings, self, npu_available=npu is not None,
                                npu_label="NPU (emulator only: slow)" if npu == "npu-emulator" else "NPU",
                                model_path=self.controller.model_path(),
                                context=loaded.context if loaded is not None else None,
                                sampling=self.controller.sampling_defaults())
        dialog.setObjectName("settings_dialog")
        dialog.engines_requested.connect(self.open_engines)
        dialog.finished.connect(lambda _: self._settings_finished(dialog))
        dialog.open()
        self.settings_dialog = dialog

    def open_engines(self) -> EnginesDialog:
        """Settings → Engines: one at a time, raised if open; a change is listed in the model picker at once."""
        if self.engines_dialog is None:
            settings = self.settings_dialog
            parent = settings if settings is not None and settings.isVisible() else self  # above a modal Settings
            dialog = EnginesDialog(self.engine_choice.registry, parent)
            dialog.setObjectName("engines_dialog")
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.engines_changed.connect(lambda: self.model_picker.set_engines(self.engine_choice.picker_entries()))
            dialog.destroyed.connect(lambda *_: setattr(self, "engines_dialog", None))
            self.engines_dialog = dialog
        self.engines_dialog.show()
        self.engines_dialog.raise_()
        return self.engines_dialog

    def _settings_finished(self, dialog: SettingsDialog) -> None:
        """Apply what was accepted, then let the dialog go (a closed one kept under the window would be
        re-styled, hidden, by every later theme change)."""
        try:
            self._settings_closed(dialog)
        finally:
            if self.settings_dialog is dialog:
                self.settings_dialog = None
            dialog.deleteLater()

    def _settings_closed(self, dialog: SettingsDialog) -> None:
        new = dialog.result_settings
        if new is None:
            return
        self._take_settings(new, save=True)

    def settings_changed_outside(self, loaded: LoadedSettings) -> None:
        """settings.json was written by another program (a ``hearth`` command, an editor) or by this
        window: what differs from the window's settings is taken as a change in the dialog would be.
        An open Settings dialog keeps the user's edits and says so (:meth:`SettingsDialog.changed_outside`)."""
        new, old = loaded.settings, self.controller.settings
        if loaded.unreadable or new == old:  # half-written, or the window's own save
            return
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.changed_outside(new)
        self._take_settings(new, save=False)
        app = QApplication.instance()
        if (new.theme, new.text_size) != (old.theme, old.text_size) and isinstance(app, QApplication):
            apply_appearance(app, theme=new.theme, text_size=new.text_size)
        self.banner.show_notice("info", OUTSIDE_NOTICE)

    def _take_settings(self, new: Settings, *, save: bool) -> None:
        old = self.controller.settings
        self._store_settings(new, save=save)
        self.chat_view.set_highlight_drafts(new.highlight_drafts)
        self.highlight_action.setChecked(new.highlight_drafts)
        remote = remote_name(self.controller.model_ref) is not None  # they apply when a local model is next loaded
        if not remote and any(getattr(new, name) != getattr(old, name) for name in LOAD_TIME_SETTINGS):
            self.model_picker.set_current(new.model)
            self.controller.load_model(new.model)
        if (new.data_folder, new.snapshot_budget_gib) != (old.data_folder, old.snapshot_budget_gib):
            self.banner.show_notice("info", "The new data folder and snapshot budget take effect the next time "
                                            "Hearth starts.")

    def _store_settings(self, settings: Settings, *, save: bool = True) -> None:
        tools_before = self.controller.settings.tools
        self.controller.settings = settings
        if settings.tools != tools_before:
            self.controller.tools_changed()
        self.models.memory_percent = settings.memory_budget_percent
        try:
            if save:
                self.save_settings(settings, npu_available=self.controller.npu_kind() is not None)
        except SettingsError as exc:
            self.banner.show_notice("error", f"{exc} The change applies until Hearth closes.")
        self.api_server.apply(settings)  # after saving: the server reads the saved settings when it starts

    def _api_server_failed(self, text: str) -> None:
        """Said where the user looks: the settings dialog while it is open, else the banner."""
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.show_api_server_problem(text)
        else:
            self.banner.show_notice("error", text, "Settings…", self.open_settings)
