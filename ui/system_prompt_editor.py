"""A conversation's "System prompt…": read it, let the user edit it, store the change.

Asked for from the conversation list's context menu (:attr:`ConversationPanel.system_prompt_requested`).
The conversation is read and the change stored on the store thread (the GUI never waits); the store
thread runs work in order, so a message sent after the change is sent with the new prompt. When the
conversation is the one on screen, the controller's copy is replaced and the status line says when
the change applies. A new conversation starts with the default from Settings
(:attr:`app.services.turn.TurnOptions.system_prompt`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from model_store.conversations import Conversation, ConversationStore
from ui.controller import ChatController
from ui.views.conversation_panel import ConversationPanel
from ui.views.system_prompt_dialog import SystemPromptDialog

CHANGED = "The new system prompt is used from your next message; earlier answers stay as they were."


class SystemPromptEditor(QObject):
    def __init__(self, controller: ChatController, panel: ConversationPanel, window: QWidget) -> None:
        super().__init__(window)
        self.controller, self.window = controller, window
        self.dialog: SystemPromptDialog | None = None
        panel.system_prompt_requested.connect(self.edit)

    def edit(self, conversation_id: str) -> None:
        """Open the dialog for ``conversation_id`` once it has been read."""
        self.controller.store.submit(lambda store: store.get(conversation_id), self._open)

    def _open(self, conversation: Conversation) -> None:
        dialog = SystemPromptDialog(conversation.title, conversation.system_prompt,
                                    self.controller.settings.system_prompt, self.window)
        dialog.setObjectName("system_prompt_dialog")
        dialog.finished.connect(lambda _: self._closed(conversation, dialog))
        dialog.open()
        self.dialog = dialog

    def _closed(self, conversation: Conversation, dialog: SystemPromptDialog) -> None:
        text = dialog.result_text
        if text is None or text == conversation.system_prompt:
            return

        def store_it(store: ConversationStore) -> Conversation:
            return store.set_system_prompt(conversation.id, text)

        self.controller.store.submit(store_it, self._stored)

    def _stored(self, conversation: Conversation) -> None:
        shown = self.controller.conversation
        if shown is not None and shown.id == conversation.id:
            self.controller.conversation = conversation
            self.controller.status.emit(CHANGED)
