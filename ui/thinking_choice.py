"""A conversation's "Think before answering": what the composer's switch shows, and where a choice goes.

The choice is a conversation setting (:data:`~app.services.turn.THINKING_SETTING`, a bool; absent:
the model's default, ``ModelFacts.thinks``) that the engine's template reads with each turn
(:func:`~app.services.turn.template_spec`). Turning the switch in a stored conversation writes the
setting at once (on the store thread: the GUI never waits) and remembers it for the session, so a
``Conversation`` read before the write cannot show the old value. In a new conversation, not stored
yet, the choice waits here and goes with its first message: the controller passes it in that turn's
options and stores it in the conversation it creates (:attr:`ChatController.thinking_choice`); a
document attached to a new chat takes it the same way (:mod:`ui.document_controller`).

The switch follows the loaded model and the conversation on screen (:func:`~ui.views.thinking_switch.switch_state`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.services.turn import THINKING_SETTING
from model_store.conversations import Conversation, ConversationStore
from ui.controller import ChatController
from ui.views.thinking_switch import ThinkingSwitch, switch_state


class ThinkingChoice(QObject):
    def __init__(self, controller: ChatController, switch: ThinkingSwitch) -> None:
        super().__init__(controller)
        self.controller, self.switch = controller, switch
        self.pending: bool | None = None  # chosen for the new conversation not stored yet
        self._chosen: dict[str, bool] = {}  # conversation id -> chosen in this session (stored, or being stored)
        c = controller
        c.model_loaded.connect(lambda _: self.refresh())
        c.model_failed.connect(lambda _: self.refresh())
        c.bridge.died.connect(lambda *_: self.refresh())
        c.conversation_changed.connect(self._conversation_changed)
        switch.chosen.connect(self.choose)
        c.thinking_choice = self.for_next_turn
        self.refresh()

    def setting(self) -> bool | None:
        """The open conversation's choice (the new one's: the choice waiting); None: the model's default."""
        conversation = self.controller.conversation
        if conversation is None:
            return self.pending
        if conversation.id in self._chosen:
            return self._chosen[conversation.id]
        stored = conversation.settings.get(THINKING_SETTING)
        return stored if isinstance(stored, bool) else None

    def for_next_turn(self) -> bool | None:
        """What the next turn asks of the template: a choice made in this session, else None (the
        stored setting is read with the conversation, or the model decides)."""
        conversation = self.controller.conversation
        return self.pending if conversation is None else self._chosen.get(conversation.id)

    def choose(self, on: bool) -> None:
        conversation = self.controller.conversation
        if conversation is None:
            self.pending = on
            return
        conversation_id = conversation.id
        self._chosen[conversation_id] = on

        def store(s: ConversationStore) -> None:
            s.update_settings(conversation_id, {THINKING_SETTING: on})

        self.controller.store.submit(store, on_error=lambda message: self.controller.notice.emit(
            "error", f"Could not save “Think before answering” for this conversation: {message} It applies until "
                     "Hearth closes."))

    def _conversation_changed(self, conversation: Conversation | None) -> None:
        if conversation is not None:  # a conversation on screen (a new one took the waiting choice as it was stored)
            self.pending = None
        self.refresh()

    def refresh(self) -> None:
        loaded = self.controller.loaded
        self.switch.show_state(switch_state(loaded.facts if loaded is not None else None, self.setting()))
