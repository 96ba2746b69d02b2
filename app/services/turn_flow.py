"""The steps of a turn in a window, without Qt: store the question, send it, follow its events, keep the answer.

A window never waits, so each step continues in a callback: the store's work runs through ``submit``
(a job, then ``on_done(result)`` or ``on_error(message)`` back on the caller's thread: the GUI's
:class:`ui.store_thread.StoreThread`), commands go through ``send`` (False while the engine is down),
and the engine's events come in through :meth:`TurnFlow.take`. What the window shows of each step
is the :class:`TurnScreen`'s part; the flow holds which turns are in flight and ends each one
exactly once, whichever way it ends (its ``Finished``, the engine's death, the window closing).

The command is sent from the store's thread as soon as the question is stored, not after a trip
back to the window's thread: a busy window does not hold a message back. So its first events can
arrive before the window has shown the turn; they wait for it (:attr:`TurnFlow._early`).

One turn, step by step:

1. :meth:`TurnFlow.begin` takes a :class:`NewMessage` or a :class:`NewAnswer` and stores the
   question and an empty answer (:func:`app.services.turn.start_turn`,
   :func:`~app.services.turn.start_regeneration`), or nothing is sent when another writer holds the
   conversation (:meth:`TurnScreen.turn_refused`) or the store failed (:meth:`TurnScreen.turn_not_saved`);
2. with the turn stored, its command is sent, and it is shown (:meth:`TurnScreen.turn_started`);
3. each event of its request is fed to the turn; one that does not end it is shown
   (:meth:`TurnScreen.turn_event`);
4. the end is stored (:func:`app.services.turn.end_answer`: read back, where the worker stored the
   answer itself) and shown (:meth:`TurnScreen.turn_stored`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.engine_clients.client import EngineDead
from app.services.draft_heads import with_installed_head
from app.services.turn import (
    THINKING_SETTING, PendingTurn, TurnOptions, Writer, end_answer, start_regeneration, start_turn,
)
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from model_store.writer_lock import ConversationBusy

StoreJob = Callable[[ConversationStore], Any]
Submit = Callable[[StoreJob, Callable[[Any], None] | None, Callable[[str], None] | None], None]
# What a store_turn job returns: the conversation, the stored turn, and what the screen shows of it.
StoredTurn = tuple[Conversation, PendingTurn, Any]
FlowEvent = p.Event | EngineDead
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
    computer, its facts, so an installed EAGLE-3 head can draft (drafting auto) from ``data_dir``."""

    model: str
    local_facts: p.ModelFacts | None = None
    data_dir: Path | None = None


class TurnScreen(Protocol):
    """What the window does at each step of a turn (all called on the caller's thread)."""

    def turn_started(self, conversation: Conversation, turn: PendingTurn, shown: Any) -> None:
        """The question and the empty answer are stored; ``shown`` is what the store job read for the screen."""

    def turn_event(self, turn: PendingTurn, event: p.Event) -> None:
        """An event of the turn's request that did not end it (progress, a delta, an error)."""

    def turn_stored(self, turn: PendingTurn, problem: str = "") -> None:
        """The turn ended and its answer is stored (``turn.answer`` as stored), or, with ``problem``,
        could not be (the store says why; the turn is over all the same)."""

    def turn_refused(self, busy: ConversationBusy, text: str) -> None:
        """Another writer holds the conversation: nothing was stored or sent."""

    def turn_not_saved(self, message: str, text: str) -> None:
        """The store could not take the question (``message`` says why): nothing was sent."""


class TurnFlow:
    """The turns a window has in flight, from the stored question to the stored answer."""

    def __init__(self, submit: Submit, send: Callable[[p.Command], bool], screen: TurnScreen, writer: Writer,
                 read_shown: ReadShown) -> None:
        self._submit, self._send, self._screen = submit, send, screen
        self._writer, self._read_shown = writer, read_shown
        self.turns: dict[str, PendingTurn] = {}  # by request id: sent, not ended yet
        self.starting = False  # a question is being stored
        self.storing = 0  # ended turns whose answers are being stored
        # sent from the store's thread, not yet shown: their events so far, by request id
        self._early: dict[str, list[FlowEvent]] = {}
        self._early_lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return bool(self.turns) or self.starting or self.storing > 0

    def begin(self, request: NewMessage | NewAnswer, answering: Answering) -> None:
        """Store the turn and send its command, on the store's thread; then show it."""
        self.starting = True
        text = request.text if isinstance(request, NewMessage) else ""  # given back if nothing is sent
        self._submit(lambda store: self._store_and_send(store, request, answering), self._started_or_refused(text),
                     lambda message: self._not_saved(message, text))

    def take(self, event: p.Event) -> bool:
        """Feed an engine event to the turn it belongs to; False when it is none of this flow's."""
        request_id = getattr(event, "request_id", None)
        turn = self.turns.get(request_id)
        if turn is not None:
            self._follow(turn, event)
            return True
        with self._early_lock:
            early = self._early.get(request_id)
        if early is None:
            return False
        early.append(event)
        return True

    def engine_died(self, dead: EngineDead) -> None:
        """The worker is gone: every turn in flight ends, its answer kept as far as it was written."""
        for turn in list(self.turns.values()):
            self._follow(turn, dead)
        with self._early_lock:
            for early in self._early.values():
                early.append(dead)

    def stop(self) -> None:
        """Ask the engine to stop every answer being written (each ends with its ``Finished``, stopped)."""
        with self._early_lock:
            request_ids = [*self.turns, *self._early]
        for request_id in request_ids:
            self._send(p.Cancel(request_id=request_id))

    def abandon(self, why: str) -> None:
        """The window is closing: store what every turn in flight has written, marked interrupted by ``why``."""
        for turn in list(self.turns.values()):
            del self.turns[turn.command.request_id]
            turn.abandoned = why
            self._submit(lambda store, turn=turn: end_answer(store, turn), None, None)

    def _store_and_send(self, store: ConversationStore, request: NewMessage | NewAnswer,
                        answering: Answering) -> tuple[StoredTurn, bool] | ConversationBusy:
        """On the store's thread: the stored turn, and whether its command went to the engine."""
        try:
            conversation, turn = self._store_turn(store, request)
        except ConversationBusy as busy:
            return busy
        turn.model = answering.model
        if answering.local_facts is not None and answering.data_dir is not None:
            turn.command = with_installed_head(turn.command, answering.local_facts, answering.data_dir)
        with self._early_lock:
            self._early[turn.command.request_id] = []
        sent = self._send(turn.outgoing())
        return (conversation, turn, self._read_shown(store, conversation.id)), sent

    def _store_turn(self, store: ConversationStore, request: NewMessage | NewAnswer) -> tuple[Conversation, PendingTurn]:
        if isinstance(request, NewAnswer):
            turn = start_regeneration(store, request.conversation.id, request.user_message_id, request.options,
                                      self._writer)
            return request.conversation, turn
        options = request.options
        conversation, turn = start_turn(store, request.conversation_id, request.text, options, self._writer,
                                        title=request.text.splitlines()[0][:60], model=request.model,
                                        reply_to=request.reply_to, from_start=request.from_start)
        if request.conversation_id is None and options.enable_thinking is not None:  # the new conversation keeps it
            conversation = store.update_settings(conversation.id, {THINKING_SETTING: options.enable_thinking})
        return conversation, turn

    def _started_or_refused(self, text: str) -> Callable[[tuple[StoredTurn, bool] | ConversationBusy], None]:
        def started_or_refused(result: tuple[StoredTurn, bool] | ConversationBusy) -> None:
            self.starting = False
            if isinstance(result, ConversationBusy):
                self._screen.turn_refused(result, text)
            else:
                self._started(*result)
        return started_or_refused

    def _started(self, stored: StoredTurn, sent: bool) -> None:
        """Show the turn, then what its request sent meanwhile (or its end, when it could not be sent)."""
        conversation, turn, shown = stored
        request_id = turn.command.request_id
        with self._early_lock:
            early = self._early.pop(request_id)
        self.turns[request_id] = turn
        self._screen.turn_started(conversation, turn, shown)
        if not sent:
            early = [EngineDead(exit_code=None, message="the engine is not running")]
        for event in early:
            if request_id in self.turns:
                self._follow(turn, event)

    def _follow(self, turn: PendingTurn, event: FlowEvent) -> None:
        if turn.feed(event):
            self._end(turn)
        elif not isinstance(event, EngineDead):
            self._screen.turn_event(turn, event)

    def _not_saved(self, message: str, text: str) -> None:
        self.starting = False
        self._screen.turn_not_saved(message, text)

    def _end(self, turn: PendingTurn) -> None:
        self.turns.pop(turn.command.request_id, None)
        self.storing += 1
        self._submit(lambda store: end_answer(store, turn), self._answer_stored,
                     lambda problem: self._answer_stored(turn, problem))

    def _answer_stored(self, turn: PendingTurn, problem: str = "") -> None:
        self.storing -= 1
        self._screen.turn_stored(turn, problem)
