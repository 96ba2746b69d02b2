"""API requests as conversations, so a request that continues an earlier one reads only what is new.

An OpenAI client sends the whole conversation with every request. Each request's messages are
stored in the server's own database (a private folder of the server run, never the user's
conversation list) as a branch: a message is found again by the chained digest of its role and text
and every message before it, so the next request of the same conversation (the same messages, the
answer the server gave, and a new question) walks the stored branch as far as it matches and adds
only the rest. The answer is then an ``AnswerTurn`` on that branch: the worker stands on the
deepest snapshot of the branch, exactly as for the app's own conversations (``engine.state.snapshot_cursor``), and
saves the answer's end under the answer. Several clients each follow their own branch.

A request's last message is always stored anew, never matched: only the messages before it are
looked for, so the worker always has the request's own question to read, and each request reads
what it would read alone, whatever was asked before. (Matched whole, a repeated question stood on
the state the worker kept where the stored question ended, which can hold the whole prompt: nothing
was left to read, "the prompt is empty", 400. Two users who both send "hi", or a client that
retries, did that.) An answer is looked for only once it is finished (:meth:`ApiConversations.finish`).

Not thread-safe: used only from the engine runner's thread (the SQLite connection's thread).
"""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from app.surfaces.serve.schema import ApiMessage
from engine.protocol.message_identity import ROOT, message_identity
from app.services.turn import PendingTurn, TurnOptions, begin_answer, conversation_turns, end_answer
from model_store.conversation_titles import title_of
from model_store.conversations import ConversationStore, Message
from model_store.db import StoreError

KEPT_CONVERSATIONS = 500  # the least recently continued beyond this are deleted, with their snapshots


class ApiConversations:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self._messages: dict[str, tuple[str, str]] = {}  # chain digest -> (conversation id, message id)
        self._used: OrderedDict[str, None] = OrderedDict()  # conversation ids, least recently used first

    def begin(self, messages: list[ApiMessage], options: TurnOptions, stop: list[str], model: str) -> PendingTurn:
        """Store what is new in ``messages`` and an empty answer by ``model``; the turn's command answers it.
        A message is matched by its role and text: clients seldom send an answer's reasoning back,
        and the stored answer keeps its own."""
        parent, digest, matched = self._stored_prefix(messages)
        conversation_id = self._conversation_for(parent, messages, model)
        self._touch(conversation_id)
        for sent in messages[matched:]:
            digest = message_identity(digest, sent.role, sent.text)
            message = self.store.add_message(conversation_id, sent.role, sent.text,
                                             parent_id=parent.id if parent else None, reasoning=sent.reasoning)
            self._messages[digest] = (conversation_id, message.id)
            parent = message
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
        """Store the answer; a finished one can be continued by the next request that quotes it."""
        turn = end_answer(self.store, turn)
        if turn.status == "done" and turn.text:
            history = self.store.branch(turn.answer.id)
            digest = ROOT
            for message in history:
                digest = message_identity(digest, message.role, message.content)
            self._messages[digest] = (turn.conversation_id, turn.answer.id)
        return turn

    def _stored_prefix(self, messages: list[ApiMessage]) -> tuple[Message | None, str, int]:
        """The deepest stored message the request's messages start with, its digest, and how many
        of the request's messages it covers: never the last one, the request's own question (see
        the module's docstring)."""
        found: tuple[Message | None, str, int] = (None, ROOT, 0)
        digest = ROOT
        for index, sent in enumerate(messages[:-1]):
            digest = message_identity(digest, sent.role, sent.text)
            known = self._messages.get(digest)
            if known is None:
                break
            try:
                found = (self.store.message(known[1]), digest, index + 1)
            except StoreError:
                break
        return found

    def _conversation_for(self, parent: Message | None, messages: list[ApiMessage], model: str) -> str:
        if parent is not None:
            return parent.conversation_id
        first_user = next((sent.text for sent in messages if sent.role == "user"), "")
        title = title_of(first_user, fallback="API request")
        return self.store.create(title, model=model).id

    def _touch(self, conversation_id: str) -> None:
        """Mark it used; delete the least recently used beyond :data:`KEPT_CONVERSATIONS`."""
        self._used[conversation_id] = None
        self._used.move_to_end(conversation_id)
        while len(self._used) > KEPT_CONVERSATIONS:
            oldest, _ = self._used.popitem(last=False)
            self.store.delete(oldest)
            self._messages = {d: known for d, known in self._messages.items() if known[0] != oldest}

