"""API requests as conversations, so a request that continues an earlier one reads only what is new.

An OpenAI client sends the whole conversation with every request. Each request's messages are
stored in the server's own database (a folder of the server's address, never the user's
conversation list: :func:`app.surfaces.serve.main.server_folder`) as a branch: a message is found
again by its identity (:mod:`model_store.message_identity`: its role, text and reasoning and those
of every message before it, kept with each stored message), so the next request of the same
conversation (the same messages, the answer the server gave, and a new question) walks the stored
branch as far as it matches and adds only the rest, after a restart of the server too. The answer
is then an ``AnswerTurn`` on that branch: the worker stands on the deepest snapshot of the branch,
exactly as for the app's own conversations (``engine.state.snapshot_cursor``), and saves the
answer's end under the answer. Several clients each follow their own branch.

An answer is matched with its reasoning: a client that sends back ``reasoning_content`` other than
the answer's own (or none, as most do) is answered on what it sent, a branch beside the stored
answer that stands on the question's snapshot, never on reasoning the client did not send.

A request's last message is always stored anew, never matched: only the messages before it are
looked for, so the worker always has the request's own question to read, and each request reads
what it would read alone, whatever was asked before. (Matched whole, a repeated question stood on
the state the worker kept where the stored question ended, which can hold the whole prompt: nothing
was left to read, "the prompt is empty", 400. Two users who both send "hi", or a client that
retries, did that.) An answer still being written is never matched.

Not thread-safe: used only from the engine runner's thread (the SQLite connection's thread).
"""

from __future__ import annotations

import msgspec

from app.surfaces.serve.chat_messages import ApiMessage
from app.services.turn import PendingTurn, TurnOptions, begin_answer, conversation_turns, end_answer
from model_store.conversation_titles import title_of
from model_store.conversations import ConversationStore, Message
from model_store.message_identity import ROOT, message_identity

KEPT_CONVERSATIONS = 500  # the least recently continued beyond this are deleted, with their snapshots


class ApiConversations:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def begin(self, messages: list[ApiMessage], options: TurnOptions, stop: list[str], model: str) -> PendingTurn:
        """Store what is new in ``messages`` and an empty answer by ``model``; the turn's command answers it."""
        parent, matched = self._stored_prefix(messages)
        conversation_id = self._conversation_for(parent, messages, model)
        for sent in messages[matched:]:
            parent = self.store.add_message(conversation_id, sent.role, sent.text,
                                            parent_id=parent.id if parent else None, reasoning=sent.reasoning,
                                            tool_part=sent.tool_part)
        self._keep_newest()
        history = self.store.branch(parent.id)
        turn = begin_answer(self.store, conversation_id, history, options)
        turn.command = msgspec.structs.replace(turn.command, stop=stop)
        turn.model = model
        return turn

    def left_out(self, turn: PendingTurn) -> int:
        """How many of the turn's messages the branch's standing cut leaves out of what the model reads
        (app.services.context_cut); a cut this turn makes adds its own (``Finished.context_cut``)."""
        history = self.store.branch(turn.user.id)
        return len(conversation_turns(history, self.store.get(turn.conversation_id))) - len(turn.command.messages)

    def finish(self, turn: PendingTurn) -> PendingTurn:
        """Store the answer (its identity with it): the next request that quotes it continues it."""
        return end_answer(self.store, turn)

    def _stored_prefix(self, messages: list[ApiMessage]) -> tuple[Message | None, int]:
        """The deepest stored message the request's messages start with, and how many of the
        request's messages it covers: never the last one, the request's own question (see the
        module's docstring)."""
        found: tuple[Message | None, int] = (None, 0)
        identity = ROOT
        for index, sent in enumerate(messages[:-1]):
            identity = message_identity(identity, sent.role, sent.text, sent.reasoning, sent.tool_part)
            stored = self.store.with_identity(identity)
            if stored is None:
                break
            found = (stored, index + 1)
        return found

    def _conversation_for(self, parent: Message | None, messages: list[ApiMessage], model: str) -> str:
        if parent is not None:
            return parent.conversation_id
        first_user = next((sent.text for sent in messages if sent.role == "user"), "")
        title = title_of(first_user, fallback="API request")
        return self.store.create(title, model=model).id

    def _keep_newest(self) -> None:
        """Delete the least recently continued conversations beyond :data:`KEPT_CONVERSATIONS`."""
        for old in self.store.list()[KEPT_CONVERSATIONS:]:
            self.store.delete(old.id)
