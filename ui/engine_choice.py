"""Which engine answers, and the user's word before a conversation's messages leave this computer.

The model picker lists the remote engines of the :class:`~app.services.engines.EngineRegistry`
beside the local models; choosing one loads ``engine:NAME`` through the controller like any model.
A conversation's messages go to a remote engine only with the user's consent, asked once per
conversation and engine (:func:`~ui.remote_text.consent_question`) and kept in the conversation's
settings (``settings["remote_ok"]``, a list of engine names): when the open conversation (one with
messages) is switched to a remote engine, and before sending in a conversation opened while one is
in use. A conversation started on a remote engine, or whose messages that engine already
answered, needs no question: the user chose the engine before the first word left.

:attr:`EngineChoice.marker_changed` carries the line shown above the chat of a conversation that
uses or has used a remote engine (:func:`~ui.remote_text.marker_text`), or "" for none.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.services.engines import EngineProblem, EngineRegistry
from model_store.conversations import ConversationStore
from ui.controller import ChatController
from ui.item_models.messages import APPENDED_ROLES
from ui.remote_text import engine_ref, engines_used, marker_text, picker_label, remote_name

CONSENT_KEY = "remote_ok"  # conversation settings: the remote engines its messages may go to
Ask = Callable[[str, str], bool]  # (engine name, its URL) -> whether the user agreed


class EngineChoice(QObject):
    marker_changed = Signal(str)  # the line above the chat; "" hides it

    def __init__(self, controller: ChatController, registry: EngineRegistry, ask: Ask) -> None:
        super().__init__(controller)
        self.controller, self.registry, self.ask = controller, registry, ask
        self._granted: dict[str, set[str]] = {}  # conversation id -> engines agreed to in this session
        self.marker = ""
        c = controller
        for changed in (c.model_loaded, c.model_failed, c.conversation_changed, c.messages.modelReset,
                        c.messages.rowsInserted):
            changed.connect(lambda *_: self.refresh_marker())
        c.messages.dataChanged.connect(self._message_changed)
        c.bridge.died.connect(lambda *_: self.refresh_marker())
        c.turn_finished.connect(self._turn_finished)
        c.before_sending = self.before_sending

    # -- the picker ------------------------------------------------------------------------------

    def picker_entries(self) -> list[tuple[str, str]]:
        """``(reference, label)`` of every remote engine, for the model picker."""
        return [(engine_ref(e.name), picker_label(e.name, e.model)) for e in self.registry.entries()]

    def active_engine(self) -> str | None:
        """The remote engine loaded now, or None while this computer answers (or nothing is loaded)."""
        loaded = self.controller.loaded
        return remote_name(loaded.facts.path) if loaded is not None else None

    # -- choosing --------------------------------------------------------------------------------

    def choose(self, ref: str) -> bool:
        """Load ``ref`` (a local model or ``engine:NAME``) after asking, if the open conversation's
        messages would go to a remote engine for the first time; False when the user said no."""
        name = remote_name(ref)
        if name is not None and not self._consent(name):
            return False
        self.controller.load_model(ref)
        return True

    def before_sending(self) -> bool:
        """Whether a message may be sent (or an answer written again) in the open conversation now."""
        name = self.active_engine()
        return name is None or self._consent(name)

    def _consent(self, name: str) -> bool:
        """Whether the open conversation's messages may go to ``name``, asking the first time."""
        conversation = self.controller.conversation
        if conversation is None or self.controller.messages.rowCount() == 0 or self.consented(name):
            return True
        try:
            url = self.registry.get(name).url
        except EngineProblem:  # removed meanwhile: loading it will say so
            return True
        if not self.ask(name, url):
            return False
        self._grant(conversation.id, name)
        return True

    def consented(self, name: str) -> bool:
        """The open conversation's messages may go to ``name``: agreed before, or already answered there."""
        conversation = self.controller.conversation
        if conversation is None:
            return True
        stored = conversation.settings.get(CONSENT_KEY)
        agreed = set(stored) if isinstance(stored, list) else set()
        return (name in agreed or name in self._granted.get(conversation.id, set())
                or name in engines_used(r.message.stats for r in self.controller.messages.rows()))

    def _grant(self, conversation_id: str, name: str) -> None:
        """Remember the consent now and in the conversation's settings (on the store thread)."""
        self._granted.setdefault(conversation_id, set()).add(name)

        def record(store: ConversationStore) -> None:
            stored = store.get(conversation_id).settings.get(CONSENT_KEY)
            names = [n for n in stored if isinstance(n, str)] if isinstance(stored, list) else []
            if name not in names:
                store.update_settings(conversation_id, {CONSENT_KEY: [*names, name]})

        self.controller.store.submit(record)

    def _turn_finished(self, turn) -> None:
        """An answer written remotely: the conversation's consent for that engine is recorded too."""
        remote = turn.finished.remote if turn.finished is not None else None
        if remote is not None and remote.engine not in self._granted.get(turn.conversation_id, set()):
            self._grant(turn.conversation_id, remote.engine)
        self.refresh_marker()

    # -- the marker ------------------------------------------------------------------------------

    def _message_changed(self, top, bottom, roles=()) -> None:
        if roles != APPENDED_ROLES:  # a streamed delta changes no message's engine
            self.refresh_marker()

    def refresh_marker(self) -> None:
        names = engines_used(r.message.stats for r in self.controller.messages.rows())
        active = self.active_engine()
        if active is not None and active not in names:
            names.append(active)
        text = marker_text(names)
        if text != self.marker:
            self.marker = text
            self.marker_changed.emit(text)
