"""The steps of a turn in a window, without Qt: store the question, send it, follow its events, keep the answer.

A window never waits, so each step continues in a callback: the store's work runs through ``submit``
(a job, then ``on_done(result)`` or ``on_error(message)`` back on the caller's thread: the GUI's
:class:`ui.store_thread.StoreThread`), commands go through ``send`` (False while the engine is down),
and the engine's events come in through :meth:`TurnFlow.take`. What the window shows of each step
is the :class:`TurnScreen`'s part; the flow holds which turns are in flight and ends each one
exactly once, whichever way it ends (its ``Finished``, the engine's death, the window closing).

One turn, step by step:

1. :meth:`TurnFlow.begin` submits the caller's ``store_turn`` job (it stores the question and an
   empty answer: :func:`app.services.turn.start_turn`), or nothing is sent when another writer holds
   the conversation (:meth:`TurnScreen.turn_refused`) or the store failed
   (:meth:`TurnScreen.turn_not_saved`);
2. with the turn stored, it is shown (:meth:`TurnScreen.turn_started`) and its command sent;
3. each event of its request is fed to the turn; one that does not end it is shown
   (:meth:`TurnScreen.turn_event`);
4. the end is stored (:func:`app.services.turn.end_answer`: read back, where the worker stored the
   answer itself) and shown (:meth:`TurnScreen.turn_stored`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from app.engine_clients.client import EngineDead
from app.services.turn import PendingTurn, end_answer
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from model_store.writer_lock import ConversationBusy

StoreJob = Callable[[ConversationStore], Any]
Submit = Callable[[StoreJob, Callable[[Any], None] | None, Callable[[str], None] | None], None]
# What a store_turn job returns: the conversation, the stored turn, and what the screen shows of it.
StoredTurn = tuple[Conversation, PendingTurn, Any]


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

    def __init__(self, submit: Submit, send: Callable[[p.Command], bool], screen: TurnScreen) -> None:
        self._submit, self._send, self._screen = submit, send, screen
        self.turns: dict[str, PendingTurn] = {}  # by request id: sent, not ended yet
        self.starting = False  # a question is being stored
        self.storing = 0  # ended turns whose answers are being stored

    @property
    def busy(self) -> bool:
        return bool(self.turns) or self.starting or self.storing > 0

    def begin(self, store_turn: Callable[[ConversationStore], StoredTurn | ConversationBusy],
              prepare: Callable[[PendingTurn], None], text: str = "") -> None:
        """Store a turn with ``store_turn`` (on the store's thread), ``prepare`` it (its command, its
        model's name), show it and send it. ``text`` is the user's message, given back if nothing is sent."""
        self.starting = True
        self._submit(store_turn, lambda stored: self._stored_question(stored, prepare, text),
                     lambda message: self._not_saved(message, text))

    def take(self, event: p.Event) -> bool:
        """Feed an engine event to the turn it belongs to; False when it is none of this flow's."""
        turn = self.turns.get(getattr(event, "request_id", None))
        if turn is None:
            return False
        if turn.feed(event):
            self._end(turn)
        else:
            self._screen.turn_event(turn, event)
        return True

    def engine_died(self, dead: EngineDead) -> None:
        """The worker is gone: every turn in flight ends, its answer kept as far as it was written."""
        for turn in list(self.turns.values()):
            turn.feed(dead)
            self._end(turn)

    def stop(self) -> None:
        """Ask the engine to stop every answer being written (each ends with its ``Finished``, stopped)."""
        for request_id in self.turns:
            self._send(p.Cancel(request_id=request_id))

    def abandon(self, why: str) -> None:
        """The window is closing: store what every turn in flight has written, marked interrupted by ``why``."""
        for turn in list(self.turns.values()):
            del self.turns[turn.command.request_id]
            turn.abandoned = why
            self._submit(lambda store, turn=turn: end_answer(store, turn), None, None)

    def _stored_question(self, stored: StoredTurn | ConversationBusy, prepare: Callable[[PendingTurn], None],
                         text: str) -> None:
        self.starting = False
        if isinstance(stored, ConversationBusy):
            self._screen.turn_refused(stored, text)
            return
        conversation, turn, shown = stored
        prepare(turn)
        self.turns[turn.command.request_id] = turn
        self._screen.turn_started(conversation, turn, shown)
        if not self._send(turn.outgoing()):
            turn.feed(EngineDead(exit_code=None, message="the engine is not running"))
            self._end(turn)

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
