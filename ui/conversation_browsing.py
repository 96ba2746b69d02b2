"""The conversations the window lists and shows: the list and its search, opening one (and having the
worker restore its state meanwhile), renaming, deleting, and switching between versions of a message.
A part of :class:`ui.controller.ChatController`, kept apart from the turns and the engine's events."""

from __future__ import annotations

from app.services.chat_rows import MessageRow, load_transcript
from app.services.turn import open_conversation_command
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from ui.model_loading import RESTARTED


class ConversationBrowsing:
    """Mixed into the chat controller: uses its signals (``status``, ``conversation_changed``), its
    store thread, bridge and list models, and its ``stop``, ``set_editing`` and
    ``_show_streaming_answers``."""

    def refresh_list(self) -> None:
        query = self.search_text or None
        self.store.submit(lambda s: s.list(query), self.conversations.set_conversations)

    def _list_turn_in(self, conversation: Conversation) -> None:
        """A turn began in ``conversation``: it is now the newest used. Without a search, that is
        one row moved to the top; a search's matches are asked of the store again."""
        if self.search_text:
            self.refresh_list()
        else:
            self.conversations.put_first(conversation)

    def search(self, text: str) -> None:
        self.search_text = text.strip()
        self.refresh_list()

    def new_conversation(self) -> None:
        self.stop()
        self.show_conversation(None, [])

    def open_conversation(self, conversation_id: str) -> None:
        if self.conversation is not None and self.conversation.id == conversation_id:
            return
        self.stop()

        def read(store: ConversationStore):
            return store.get(conversation_id), load_transcript(store, conversation_id)

        self.store.submit(read, lambda result: self._opened(*result))

    def _opened(self, conversation: Conversation, rows: list[MessageRow]) -> None:
        self.show_conversation(conversation, rows)
        self.status.emit("")
        if self.loaded is not None and rows:
            self.open_in_engine(conversation.id)

    def open_in_engine(self, conversation_id: str) -> None:
        """Have the worker restore the conversation's newest snapshot while the user reads."""

        def command(store: ConversationStore) -> p.OpenConversation:
            return open_conversation_command(store, conversation_id)

        def send(cmd: p.OpenConversation) -> None:
            if not cmd.messages:  # nothing to restore: the engine is ready as it is
                self._restart_done(RESTARTED)
                return
            self._open_request = cmd.request_id
            self.bridge.send(cmd)

        self.store.submit(command, send)

    def _on_opened(self, event: p.ConversationOpened) -> None:
        report = event.snapshot
        if report.restored:
            text = f"Resumed from snapshot, {report.restored_tokens:,} tokens not re-read."
        else:
            reason = "; ".join(report.notes) or "no snapshot saved yet"
            text = f"No snapshot used ({reason}); the next answer reads the conversation again."
        self.status.emit(text)
        self._restart_done(f"The engine restarted. {text}")

    def show_conversation(self, conversation: Conversation | None, rows: list[MessageRow]) -> None:
        if (conversation.id if conversation else None) != (self.conversation.id if self.conversation else None):
            self.status.emit("")  # what the status line said was about the conversation left
        self.conversation = conversation
        self.set_editing(None)
        self.messages.set_rows(rows)
        self._show_streaming_answers()
        self.conversation_changed.emit(conversation)

    def rename(self, conversation_id: str, title: str) -> None:
        self.store.submit(lambda s: s.rename(conversation_id, title), lambda _: self.refresh_list())

    def delete_now(self, conversation_id: str) -> None:
        self.store.submit(lambda s: s.delete(conversation_id))

    def switch_version(self, message_id: str, step: int) -> None:
        """Show another version (edit or regeneration) of a message, with what followed it."""
        if self.conversation is None or self.generating:
            return
        conversation_id = self.conversation.id

        def switch(store: ConversationStore) -> list[MessageRow]:
            versions = store.siblings(message_id)
            at = [m.id for m in versions].index(message_id) + step
            if 0 <= at < len(versions):
                store.set_leaf(conversation_id, store.newest_leaf(versions[at].id))
            return load_transcript(store, conversation_id)

        self.store.submit(switch, self.messages.set_rows)
