"""Build the window from its parts and run Qt's event loop."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.services.engines import EngineRegistry
from app.services.settings import Settings, read_settings, settings_path
from app.engine_clients.client import EngineClient
from ui.bridge import EngineBridge
from ui.controller import ChatController
from ui.document_controller import DocumentController
from ui.icon import app_icon
from ui.main_window import MainWindow
from ui.self_check import DEFAULT_TIMEOUT_S, SELF_CHECK_ENV, SELF_CHECK_TIMEOUT_ENV, SelfCheck
from ui.single_instance import Launch, SingleInstance, bring_to_front, launch_message
from ui.model_manager import ModelManager
from ui.item_models.conversation_list import ConversationListModel
from ui.item_models.messages import MessageListModel
from ui.store_thread import StoreThread
from ui.system_prompt_editor import SystemPromptEditor
from ui.theme import apply_appearance


@dataclass
class AppParts:
    """What the window needs; :mod:`app.surfaces.gui` fills it in from the user's folders and settings."""

    settings: Settings
    make_client: Callable[[], EngineClient]
    db_path: Path
    data_dir: Path  # the folder of the database, imported models and logs (settings: data folder)
    models_dir: Path
    save_settings: Callable[..., None]  # (settings, *, npu_available=False)
    cache_dir: Path
    startup_notes: tuple[str, ...] = ()
    engines: EngineRegistry | None = None  # the remote engines (None: those of the user's config folder)
    config_dir: Path | None = None  # where settings.json is, watched for other programs' changes (None: not watched)


def build_window(parts: AppParts) -> MainWindow:
    """Create the window and start the worker; the caller runs the event loop."""
    store = StoreThread(parts.db_path)
    bridge = EngineBridge(parts.make_client)
    controller = ChatController(bridge, store, parts.settings, ConversationListModel(), MessageListModel())
    models = ModelManager(store, parts.models_dir, parts.cache_dir)
    window = MainWindow(controller, DocumentController(controller), models, save_settings=parts.save_settings,
                        data_folder=parts.data_dir, engines=parts.engines)
    window.setWindowIcon(app_icon())
    if parts.config_dir is not None:  # settings.json written by a command or an editor: taken without a restart
        config = parts.config_dir
        window.outside.watch_settings(settings_path(config),
                                      lambda: window.settings_changed_outside(read_settings(config)))
    window.system_prompt_editor = SystemPromptEditor(controller, window.conversation_panel, window)
    store.failed.connect(window.show_error)  # a bound slot: disconnected when the window is gone
    if parts.startup_notes:
        window.banner.show_notice("warning", " ".join(parts.startup_notes))
    controller.start()
    return window


def run(parts: AppParts) -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("Hearth")
    app.setApplicationDisplayName("Hearth")
    app.setDesktopFileName("hearth")  # the installers' hearth.desktop: Wayland matches the window to its entry
    app.setWindowIcon(app_icon())  # dialogs and the task bar too
    apply_appearance(app, theme=parts.settings.theme, text_size=parts.settings.text_size)
    instance = SingleInstance(parts.data_dir)  # one app per user and data folder
    if (launch := instance.claim()) is not Launch.FIRST:
        message, code = launch_message(launch)
        print(message, file=sys.stderr)
        return code
    window = build_window(parts)
    instance.raise_requested.connect(lambda: bring_to_front(window))
    window.show()
    if question := os.environ.get(SELF_CHECK_ENV, "").strip():
        SelfCheck(window, question, float(os.environ.get(SELF_CHECK_TIMEOUT_ENV) or DEFAULT_TIMEOUT_S))
    code = app.exec()
    if window.isVisible():  # the loop was ended by the check, not by closing: stop the worker the same way
        window.close()
    return code
