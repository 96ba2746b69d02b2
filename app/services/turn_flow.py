"""The steps of a turn in a window, without Qt: store the question, send it, follow its events, keep the answer.

A window never waits, so each step continues in a callback: the store's work runs through ``submit``
(a job, then ``on_done(result)`` or ``on_error(message)`` back on the caller's thread: the GUI's
:class:`ui.store_thread.StoreThread`), commands go to the ``engine`` (its ``send`` is False while the
engine is down), and the engine's events come in through :meth:`TurnFlow.take`. Everything here runs
on the caller's thread; the store's jobs are other modules' functions
(:func:`app.services.turn_start.store_and_send`, :func:`app.services.turn.end_answer`). What the window shows of each step
is the :class:`TurnScreen`'s part; the flow holds which turns are in flight and ends each one
exactly once, whichever way it ends (its ``Finished``, the engine's death, the window closing).

The command is sent from the store's thread as soon as the question is stored, not after a trip
back to the window's thread: a busy window does not hold a message back. So its first events can
arrive before the window has shown the turn; they wait for it (:attr:`TurnFlow._early`, keyed by the
request id the flow made before submitting the job).

One turn, step by step:

1. :meth:`TurnFlow.begin` takes a :class:`~app.services.turn_start.NewMessage` or a
   :class:`~app.services.turn_start.NewAnswer` and stores the question and an empty answer (:func:`app.services.turn.start_turn`,
   :func:`~app.services.turn.start_regeneration`), or nothing is sent when another writer holds the
   conversation (:meth:`TurnScreen.turn_refused`) or the store failed (:meth:`TurnScreen.turn_not_saved`);
2. with the turn stored, its command is sent, and it is shown (:meth:`TurnScreen.turn_started`);
3. each event of its request is fed to the turn; one that does not end it is shown
   (:meth:`TurnScreen.turn_event`);
4. the end is stored (:func:`app.services.turn.end_answer`: read back, where the worker stored the
   answer itself) and shown (:meth:`TurnScreen.turn_stored`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from app.engine_clients.client import EngineDead, new_request_id
from app.services.turn import PendingTurn, Writer, end_answer
from app.services.turn_start import Answering, NewAnswer, NewMessage, ReadShown, StoredTurn, TurnJob, store_and_send
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore
from model_store.writer_lock import ConversationBusy

StoreJob = Callable[[ConversationStore], Any]
Submit = Callable[[StoreJob, Callable[[Any], None] | None, Callable[[str], None] | None], None]
FlowEvent = p.Event | EngineDead


class CommandSink(Protocol):
    """Where commands go (the GUI's :class:`ui.bridge.EngineBridge`): False while the engine is down."""

    def send(self, command: p.Command) -> bool: ...


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

    def __init__(self, submit: Submit, engine: CommandSink, screen: TurnScreen, writer: Writer,
                 read_shown: ReadShown) -> None:
        self._submit, self._engine, self._screen = submit, engine, screen
        self._writer, self._read_shown = writer, read_shown
        self.turns: dict[str, PendingTurn] = {}  # by request id: sent, not ended yet
        self.starting = False  # a question is being stored
        self.storing = 0  # ended turns whose answers are being stored
        # submitted, not yet shown (their commands go out from the store's thread): their events so far
        self._early: dict[str, list[FlowEvent]] = {}

    @property
    def busy(self) -> bool:
        return bool(self.turns) or self.starting or self.storing > 0

    def begin(self, request: NewMessage | NewAnswer, answering: Answering) -> None:
        """Store the turn and send its command, on the store's thread; then show it."""
        self.starting = True
        text = request.text if isinstance(request, NewMessage) else ""  # given back if nothing is sent
        request_id = new_request_id("turn")
        self._early[request_id] = []
        job = TurnJob(request, answering, request_id, self._writer, self._engine.send, self._read_shown)
        self._submit(partial(store_and_send, job), self._started_or_refused(request_id, text),
                     lambda message: self._not_saved(request_id, message, text))

    def take(self, event: p.Event) -> bool:
        """Feed an engine event to the turn it belongs to; False when it is none of this flow's."""
        request_id = getattr(event, "request_id", None)
        turn = self.turns.get(request_id)
        if turn is not None:
            self._follow(turn, event)
            return True
        early = self._early.get(request_id)
        if early is None:
            return False
        early.append(event)
        return True

    def engine_died(self, dead: EngineDead) -> None:
        """The worker is gone: every turn in flight ends, its answer kept as far as it was written."""
        for turn in list(self.turns.values()):
            self._follow(turn, dead)
        for early in self._early.values():
            early.append(dead)

    def stop(self) -> None:
        """Ask the engine to stop every answer being written (each ends with its ``Finished``, stopped)."""
        for request_id in [*self.turns, *self._early]:
            self._engine.send(p.Cancel(request_id=request_id))

    def abandon(self, why: str) -> None:
        """The window is closing: store what every turn in flight has written, marked interrupted by ``why``."""
        for turn in list(self.turns.values()):
            del self.turns[turn.command.request_id]
            turn.abandoned = why
            self._submit(partial(end_answer, turn=turn), None, None)

    def _started_or_refused(self, request_id: str,
                            text: str) -> Callable[[tuple[StoredTurn, bool] | ConversationBusy], None]:
        def started_or_refused(result: tuple[StoredTurn, bool] | ConversationBusy) -> None:
            self.starting = False
            if isinstance(result, ConversationBusy):
                self._early.pop(request_id, None)
                self._screen.turn_refused(result, text)
            else:
                self._started(*result)
        return started_or_refused

    def _started(self, stored: StoredTurn, sent: bool) -> None:
        """Show the turn, then what its request sent meanwhile (or its end, when it could not be sent)."""
        conversation, turn, shown = stored
        request_id = turn.command.request_id
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

    def _not_saved(self, request_id: str, message: str, text: str) -> None:
        self.starting = False
        self._early.pop(request_id, None)
        self._screen.turn_not_saved(message, text)

    def _end(self, turn: PendingTurn) -> None:
        self.turns.pop(turn.command.request_id, None)
        self.storing += 1
        self._submit(partial(end_answer, turn=turn), self._answer_stored,
                     lambda problem: self._answer_stored(turn, problem))

    def _answer_stored(self, turn: PendingTurn, problem: str = "") -> None:
        self.storing -= 1
        self._screen.turn_stored(turn, problem)
