"""The main window: conversation list on the left, chat in the middle, telemetry docked on the right.

The window only arranges widgets and forwards the user's actions to the :class:`ChatController`;
what those actions mean lives there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QPalette
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QMainWindow, QSplitter, QVBoxLayout, QWidget

from app.services.context_info import context_state, context_terms
from app.services.engines import EngineRegistry
from app.services.settings import Settings
from ui.api_server import ApiServerProcess
from ui.controller import ChatController
from ui.views.tool_consent import ask_tool_consent
from ui.document_controller import DocumentController
from ui.engine_choice import EngineChoice
from ui.formatting import model_name
from ui.model_manager import ModelManager
from ui.notices import STORE
from ui.outside_changes import OutsideChanges
from ui.item_models.conversation_list import ConversationListModel
from ui.item_models.messages import APPENDED_ROLES, MessageListModel
from ui.remote_text import engine_heading, remote_engine_text, remote_name
from ui.theme import text_scale
from ui.thinking_choice import ThinkingChoice
from ui.views.api_status import ApiStatus
from ui.views.banner import Banner
from ui.views.chat_view import ChatView
from ui.views.composer import Composer
from ui.views.conversation_panel import ConversationPanel
from ui.views.engines_dialog import EnginesDialog
from ui.views.document_progress import DocumentProgress
from ui.views.model_picker import ModelPicker
from ui.views.models_dialog import ModelsDialog
from ui.views.remote_marker import RemoteMarker, ask_consent
from ui.views.settings_dialog import SettingsDialog
from ui.views.status_line import StatusLine
from ui.views.system_check_dialog import SystemCheckDialog
from ui.views.telemetry_dock import TelemetryDock
from ui.views.telemetry_panel import TelemetryPanel
from ui.window_dialogs import WindowDialogs

UNDO_DELETE_MS = 10_000
SIDEBAR_WIDTH, SIDEBAR_MAX_WIDTH = 260, 360  # px: at 100 % text size, and at most (the chat needs the room)
SaveSettings = Callable[..., None]  # (settings, *, npu_available)


class MainWindow(WindowDialogs, QMainWindow):
    def __init__(self, controller: ChatController, documents: DocumentController, models: ModelManager, *,
                 save_settings: SaveSettings, data_folder: Path, engines: EngineRegistry | None = None) -> None:
        super().__init__()
        self.controller = controller
        self.engine_choice = EngineChoice(controller, engines or EngineRegistry(),
                                          ask=lambda name, url: ask_consent(self, name, url))
        self.engines_dialog: EnginesDialog | None = None
        self.documents = documents
        self.models = models
        models.setParent(self)  # dies with the window, so no late result reaches a closed window
        self.models_dialog: ModelsDialog | None = None
        self.system_check: SystemCheckDialog | None = None
        self.settings_dialog: SettingsDialog | None = None
        self.save_settings = save_settings
        self.data_folder = data_folder  # where conversations are kept (the welcome and About say it)
        self._pending_deletes: dict[str, str] = {}  # id -> title: out of the list, not yet out of the store
        self._shown_conversation: str | None = None  # whose notices the banner may be showing
        self.undo_delete_timer = QTimer(self, singleShot=True, interval=UNDO_DELETE_MS)
        self.undo_delete_timer.timeout.connect(self._delete_pending_for_good)
        self.setWindowTitle("Hearth")
        self.resize(1200, 780)
        self._build(controller.conversations, controller.messages)
        self.thinking_choice = ThinkingChoice(controller, self.composer.thinking)
        controller.confirm_tool = lambda call: ask_tool_consent(self, call)
        controller.save_tool_settings = lambda settings: self._store_settings(settings)
        self._connect()
        self._menus()
        models.memory_percent = controller.settings.memory_budget_percent
        self.refresh_models()
        self.outside = OutsideChanges(models.store, models.models_dir, models_changed=self.refresh_models,
                                      conversations_changed=self._conversations_changed_outside, parent=self)
        self.model_picker.set_engines(self.engine_choice.picker_entries())
        self.api_server.apply(controller.settings)

    # -- layout ----------------------------------------------------------------------------------

    def _build(self, conversations: ConversationListModel, messages: MessageListModel) -> None:
        self.conversation_panel = ConversationPanel(conversations)
        self.model_picker = ModelPicker()
        self.banner = Banner()
        self.status_line = StatusLine()  # wraps: a long status neither is cut nor narrows the conversation list
        self.status_line.setObjectName("status_line")
        self.remote_marker = RemoteMarker()
        self.api_status = ApiStatus()
        self.api_server = ApiServerProcess(self)
        self.chat_view = ChatView(messages, data_folder=self.data_folder)
        self.chat_view.set_highlight_drafts(self.controller.settings.highlight_drafts)
        self.composer = Composer()
        self.document_progress = DocumentProgress()
        centre = QWidget()
        centre.setAutoFillBackground(True)
        centre.setBackgroundRole(QPalette.ColorRole.Base)  # one surface with the chat; the sidebar is Window
        column = QVBoxLayout(centre)
        column.addWidget(self.model_picker)
        column.addWidget(self.banner)
        status_row = QHBoxLayout()
        status_row.addWidget(self.status_line, 1)
        status_row.addWidget(self.api_status)
        column.addLayout(status_row)
        column.addWidget(self.remote_marker)
        column.addWidget(self.chat_view, 1)
        column.addWidget(self.document_progress)
        column.addWidget(self.composer)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.conversation_panel)
        splitter.addWidget(centre)
        splitter.setStretchFactor(1, 1)
        sidebar = min(round(SIDEBAR_WIDTH * text_scale()), SIDEBAR_MAX_WIDTH)  # titles keep more of their length
        splitter.setSizes([sidebar, 700])
        self.setCentralWidget(splitter)
        self.telemetry_panel = TelemetryPanel()
        self.telemetry_dock = TelemetryDock(self.telemetry_panel, self, is_open=self.controller.settings.telemetry_open)
        self.telemetry_dock.opened_changed.connect(self._remember_telemetry)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.telemetry_dock)
        self.composer.edit.setFocus()

    def _connect(self) -> None:
        c = self.controller
        panel = self.conversation_panel
        panel.open_requested.connect(c.open_conversation)
        panel.new_requested.connect(self.new_chat)
        panel.delete_requested.connect(self.delete_conversation)
        panel.search_changed.connect(c.search)
        self.composer.send_requested.connect(self._send)
        self.composer.stop_requested.connect(c.stop)
        self.composer.edit_cancelled.connect(lambda: c.set_editing(None))
        self.chat_view.edit_requested.connect(self._edit)
        self.chat_view.regenerate_requested.connect(c.regenerate)
        self.chat_view.version_requested.connect(c.switch_version)
        self.model_picker.model_chosen.connect(self._choose_model)
        self.composer.attach_requested.connect(lambda path: self.documents.attach(Path(path)))
        self.chat_view.file_dropped.connect(lambda path: self.documents.attach(Path(path)))
        self.chat_view.new_chat_requested.connect(self.documents.new_chat_from)
        self.document_progress.cancel_requested.connect(self.documents.cancel)
        self.documents.progress.connect(self.document_progress.show_progress)
        self.documents.reading_changed.connect(self._reading_changed)
        self.documents.model_suggested.connect(self.open_models_on)
        c.notice_with_action.connect(self.banner.show_notice)
        c.generating_changed.connect(self.composer.set_generating)
        c.model_progress.connect(self.model_picker.show_progress)
        c.model_progress.connect(self.telemetry_panel.show_loading)
        c.name_model = self.model_picker.model_label
        c.model_loaded.connect(self._model_loaded)
        c.context_grown.connect(self._show_model_state)
        c.model_failed.connect(lambda _: self.model_picker.show_state("not loaded"))
        c.notice.connect(self.banner.show_notice)
        c.passing_notice.connect(self.banner.show_passing)
        c.cause_gone.connect(self.banner.clear_scope)
        c.conversation_notice.connect(self.banner.show_conversation_notice)
        c.crash_loop.connect(self._crash_loop)
        c.send_refused.connect(self._give_back)
        c.status.connect(self.status_line.setText)
        c.telemetry.connect(self.telemetry_panel.show_telemetry)
        c.conversation_changed.connect(self._conversation_changed)
        c.editing_changed.connect(lambda m: self.composer.set_editing(m.content if m is not None else None))
        c.bridge.died.connect(lambda _: self.telemetry_panel.clear())
        c.bridge.ready.connect(self._engine_started)
        c.turn_finished.connect(self._turn_finished)
        for listed in (c.conversations.modelReset, c.conversations.rowsInserted):  # a new chat's row is selected
            listed.connect(lambda *_: panel.select(c.conversation.id if c.conversation else None))
        self.models.installed_changed.connect(self._installed_changed)
        self.models.notice.connect(self.banner.show_notice)
        self.model_picker.manage_requested.connect(self.open_models)
        self.chat_view.models_requested.connect(self.open_models)
        self.chat_view.prompt_chosen.connect(self._use_example)
        for changed in (c.messages.modelReset, c.messages.rowsInserted, c.generating_changed):
            changed.connect(self._update_regenerate)
        c.messages.dataChanged.connect(self._message_changed)
        self.engine_choice.marker_changed.connect(self.remote_marker.show_text)
        self.api_status.watch(self.api_server)
        self.api_server.failed.connect(self._api_server_failed)
        self.api_server.listening.connect(lambda _url: self.banner.withdraw(self.open_settings))  # past failures

    def _menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&New chat", QKeySequence.StandardKey.New, self.new_chat)
        self._action(file_menu, "&Models…", QKeySequence("Ctrl+M"), self.open_models)
        self._action(file_menu, "&Settings…", QKeySequence("Ctrl+,"), self.open_settings)
        self._action(file_menu, "&Engines…", None, self.open_engines)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", QKeySequence.StandardKey.Quit, self.close)
        edit_menu = self.menuBar().addMenu("&Edit")
        self._action(edit_menu, "&Find conversation", QKeySequence.StandardKey.Find,
                     self.conversation_panel.focus_search)
        self.regenerate_action = self._action(edit_menu, "&Regenerate answer", QKeySequence("Ctrl+R"),
                                              lambda: self.controller.regenerate())
        self.regenerate_action.setEnabled(False)
        self.stop_action = self._action(edit_menu, "S&top answer", QKeySequence("Ctrl+."), self.controller.stop)
        self._stop_with_escape_anywhere()
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(self.telemetry_dock.toggleViewAction())
        highlight = self._action(view_menu, "&Highlight drafted text", None, self._toggle_highlight)
        highlight.setCheckable(True)
        highlight.setChecked(self.controller.settings.highlight_drafts)
        self.highlight_action = highlight
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&System check…", None, self.open_system_check)
        self._action(help_menu, "&About Hearth", None, self.open_about)

    def _stop_with_escape_anywhere(self) -> None:
        """Esc stops the answer wherever the focus is in this window. The action is enabled only while
        an answer is written, so otherwise Esc stays with the widget that uses it (leaving an edit,
        closing the rename editor); dialogs are windows of their own and keep their Esc."""
        self.stop_action.setShortcuts([QKeySequence("Ctrl+."), QKeySequence(Qt.Key.Key_Escape)])
        self.stop_action.setEnabled(self.controller.generating)
        self.controller.generating_changed.connect(self.stop_action.setEnabled)

    def _action(self, menu, text: str, shortcut, slot) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    # -- actions ---------------------------------------------------------------------------------

    def new_chat(self) -> None:
        self.composer.edit.clear()  # first: a question still waiting for the model comes back into it
        self.controller.new_conversation()
        self.composer.edit.setFocus()

    def _send(self, text: str) -> None:
        if self.controller.send(text):
            self.composer.edit.clear()

    def _use_example(self, prompt: str) -> None:
        """An example prompt clicked: in the composer, to send or change."""
        self.composer.set_text(prompt)
        self.composer.edit.setFocus()

    def _give_back(self, text: str) -> None:
        """A message that could not be sent goes back into the composer (unless something new is typed there)."""
        if not self.composer.text().strip():
            self.composer.edit.setPlainText(text)

    def _edit(self, message_id: str) -> None:
        row = self.controller.messages.find(message_id)
        if row >= 0 and not self.controller.generating:
            self.controller.set_editing(self.controller.messages.row(row).message)

    def _message_changed(self, top, bottom, roles=()) -> None:
        if roles != APPENDED_ROLES:  # a streamed delta changes no message's status
            self._update_regenerate()

    def _update_regenerate(self, *_) -> None:
        """Regenerate is offered only while the conversation on screen has an answer to write again."""
        can = self.controller.answer_to_regenerate() is not None
        self.regenerate_action.setEnabled(can and not self.controller.generating)

    def _reading_changed(self, reading: bool) -> None:
        self.document_progress.set_reading(reading)
        self.composer.attach_button.setEnabled(not reading)
        self.composer.send_button.setEnabled(not reading)

    def _choose_model(self, ref: str) -> None:
        if not self.engine_choice.choose(ref):  # the user kept the conversation on this computer
            self.model_picker.set_current(self.controller.model_ref)
            return
        if remote_name(ref) is None:  # a remote engine is chosen for the session; the saved model stays local
            self._store_settings(_with(self.controller.settings, model=ref))

    def _model_loaded(self, loaded) -> None:
        engine = remote_name(loaded.facts.path)
        name = engine_heading(engine, loaded.facts.name) if engine else model_name(self.controller.model_ref)
        self._show_model_state(loaded)
        self.telemetry_panel.show_model(name, loaded.facts.size_bytes)
        self.chat_view.welcome.show_model(name)
        self.telemetry_panel.show_device_plan(loaded.devices)

    def _show_model_state(self, loaded) -> None:
        """The picker's state line: how much the model reads at once and the memory it takes (the
        architecture and the context's mode in its tooltip); for a remote engine how much it reads
        only (its memory is not this computer's)."""
        engine = remote_name(loaded.facts.path)
        if engine:
            self.model_picker.show_state(f"{remote_engine_text(engine)} · reads up to {loaded.n_ctx:,} tokens at once")
        else:
            self.model_picker.show_state(context_state(loaded.context), context_terms(loaded.context, loaded.facts.arch))

    def _turn_finished(self, turn) -> None:
        if turn.status == "done":  # what went wrong in this conversation before is past
            self.banner.clear_scope("conversation")
        if turn.finished is not None and turn.finished.devices is not None:
            self.telemetry_panel.show_device_plan(turn.finished.devices)  # where this answer's phases ran, and why

    def _conversation_changed(self, conversation) -> None:
        if (conversation.id if conversation else None) != self._shown_conversation:
            self._shown_conversation = conversation.id if conversation else None
            self.banner.clear_scope("conversation")  # its notices were about the conversation left
        self.setWindowTitle(f"{conversation.title} — Hearth" if conversation else "Hearth")
        self.conversation_panel.select(conversation.id if conversation else None)

    def _remember_telemetry(self, is_open: bool) -> None:
        if is_open != self.controller.settings.telemetry_open:
            self._store_settings(_with(self.controller.settings, telemetry_open=is_open))

    def _toggle_highlight(self, on: bool) -> None:
        self.chat_view.set_highlight_drafts(on)
        self._store_settings(_with(self.controller.settings, highlight_drafts=on))

    def _crash_loop(self, text: str) -> None:
        """The engine crashed twice before it could answer: say so, and offer what may help."""
        self.model_picker.show_state("engine stopped")
        self._offer_ways_on(text)

    def _offer_ways_on(self, text: str) -> None:
        """The crash loop's choices. Looking (the models, the system check) keeps them offered; they go
        when the engine starts again (a retry, or a model chosen anywhere)."""

        def keeping_the_offer(look: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                look()
                self._offer_ways_on(text)

            return run

        self.banner.show_choices("error", text, [
            ("Retry with the safe CPU build", self._retry_with_safe_build),
            ("Choose another model", keeping_the_offer(self.open_models)),
            ("System check", keeping_the_offer(self.open_system_check)),
        ])

    def _retry_with_safe_build(self) -> None:
        self.controller.retry_engine("safe")

    def _engine_started(self, _ready) -> None:
        self.banner.withdraw(self._retry_with_safe_build)

    def show_error(self, message: str) -> None:
        """A store job failed: said until a later write succeeds (ui.notices.STORE)."""
        self.banner.show_passing("error", message, STORE)

    def _installed_changed(self, installed) -> None:
        self.model_picker.set_models(installed, self.controller.model_ref)

    def refresh_models(self) -> None:
        self.models.refresh()

    def _conversations_changed_outside(self) -> None:
        """Another program (or this window) changed the conversations: list them again, unless the
        user is renaming one in the list (the next change, or the next poll after it, lists them)."""
        if self.conversation_panel.list.state() != QAbstractItemView.State.EditingState:
            self.controller.refresh_list()

    # -- deleting with undo ----------------------------------------------------------------------

    def delete_conversation(self, conversation_id: str) -> None:
        """Take the conversation out of the list at once, out of the store when the undo time is up.

        Deletes made within the undo time share one Undo (and one timer), so a second delete does
        not take away the chance to undo the first."""
        model = self.controller.conversations
        row = model.row_of(conversation_id)
        self._pending_deletes[conversation_id] = model.conversation(row).title if row >= 0 else "the conversation"
        if self.controller.conversation is not None and self.controller.conversation.id == conversation_id:
            self.new_chat()
        model.hide(conversation_id)
        self.undo_delete_timer.start()
        self.banner.show_notice("info", _deleted_text(list(self._pending_deletes.values())), "Undo",
                                self._undo_deletes)

    def _undo_deletes(self) -> None:
        self.undo_delete_timer.stop()
        for conversation_id in self._pending_deletes:
            self.controller.conversations.unhide(conversation_id)
        self._pending_deletes.clear()
        self.controller.refresh_list()

    def _delete_pending_for_good(self) -> None:
        self.banner.withdraw(self._undo_deletes)
        for conversation_id in self._pending_deletes:
            self.controller.delete_now(conversation_id)
        self._pending_deletes.clear()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.undo_delete_timer.stop()
        self._delete_pending_for_good()
        if self.system_check is not None:
            self.system_check.reject()  # stops its child process, which would outlive the window
        self.models.shutdown()
        self.api_server.stop()  # the server and its worker end with the app
        self.controller.shutdown()
        super().closeEvent(event)


def _deleted_text(titles: list[str]) -> str:
    """"Deleted “Plans”.", "Deleted “Plans” and “Notes”.", "Deleted 3 conversations."."""
    if len(titles) == 1:
        return f"Deleted “{titles[0]}”."
    if len(titles) == 2:
        return f"Deleted “{titles[0]}” and “{titles[1]}”."
    return f"Deleted {len(titles)} conversations."


def _with(settings: Settings, **changes) -> Settings:
    return msgspec.structs.replace(settings, **changes)
