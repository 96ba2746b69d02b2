"""What a window asks for when it sends a turn, and the store-thread job that stores it and sends it.

The window's thread makes the request id (so the flow can hold the request's early events before
the turn is shown) and submits :func:`store_and_send` to the store's thread, which stores the
question and an empty answer (:func:`app.services.turn.start_turn`,
:func:`~app.services.turn.start_regeneration`) and at once sends the command to the engine: a busy
window does not hold a message back. Nothing here runs on the window's thread, and nothing of
:mod:`app.services.turn_flow` runs on the store's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.services.draft_heads import with_installed_head
from app.services.tool_round import ToolResults, store_results
from app.services.turn import THINKING_SETTING, PendingTurn, TurnOptions, Writer, start_regeneration, start_turn
from engine import protocol as p
from model_store.conversation_titles import title_of
from model_store.conversations import Conversation, ConversationStore
from model_store.installed import ModelLibrary
from model_store.writer_lock import ConversationBusy

# What store_and_send returns: the conversation, the stored turn, and what the screen shows of it.
StoredTurn = tuple[Conversation, PendingTurn, Any]
ReadShown = Callable[[ConversationStore, str], Any]  # what the screen shows of a conversation, read on the store's thread


@dataclass(frozen=True)
class NewMessage:
    """A user message to store and answer: in ``conversation_id`` (None: a new conversation titled
    after it), after its newest message, or after ``reply_to`` (an edit), or first (``from_start``)."""

    text: str
    conversation_id: str | None
    options: TurnOptions
    model: str = "default"  # the model a new conversation is made with
    reply_to: str | None = None
    from_start: bool = False


@dataclass(frozen=True)
class NewAnswer:
    """Another answer to a stored user message (the earlier ones stay as its versions)."""

    conversation: Conversation
    user_message_id: str
    options: TurnOptions


@dataclass(frozen=True)
class Answering:
    """Who answers a turn sent now: the model's name for its statistics, and, for a model of this
    computer, its facts, so an installed EAGLE-3 head can draft (drafting auto)."""

    model: str
    local_facts: p.ModelFacts | None = None


@dataclass(frozen=True)
class TurnJob:
    """Everything the store's thread needs for one turn: what to store, who answers, under which
    request id, who writes, where to send the command and what to read back for the screen."""

    request: NewMessage | NewAnswer | ToolResults
    answering: Answering
    request_id: str
    writer: Writer
    send: Callable[[p.Command], bool]
    read_shown: ReadShown


def store_and_send(job: TurnJob, store: ConversationStore) -> tuple[StoredTurn, bool] | ConversationBusy:
    """On the store's thread: the stored turn, and whether its command went to the engine (or, when
    another writer holds the conversation, why nothing was stored)."""
    try:
        conversation, turn = _store_turn(store, job.request, job.writer, job.request_id)
    except ConversationBusy as busy:
        return busy
    turn.model = job.answering.model
    if job.answering.local_facts is not None:  # the registry is read over the job's own connection
        turn.command = with_installed_head(turn.command, job.answering.local_facts, ModelLibrary(store.db))
    sent = job.send(turn.outgoing())
    return (conversation, turn, job.read_shown(store, conversation.id)), sent


def _store_turn(store: ConversationStore, request: NewMessage | NewAnswer | ToolResults, writer: Writer,
                request_id: str) -> tuple[Conversation, PendingTurn]:
    if isinstance(request, ToolResults):
        return request.conversation, store_results(store, request, writer, request_id)
    if isinstance(request, NewAnswer):
        turn = start_regeneration(store, request.conversation.id, request.user_message_id, request.options, writer,
                                  request_id)
        return request.conversation, turn
    options = request.options
    conversation, turn = start_turn(store, request.conversation_id, request.text, options, writer,
                                    title=title_of(request.text), model=request.model, reply_to=request.reply_to,
                                    from_start=request.from_start, request_id=request_id)
    if request.conversation_id is None and options.enable_thinking is not None:  # the new conversation keeps it
        conversation = store.update_settings(conversation.id, {THINKING_SETTING: options.enable_thinking})
    return conversation, turn
