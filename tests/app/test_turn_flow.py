"""A window's turn steps without Qt (app.services.turn_flow): a real SQLite store, the engine's events scripted.

The store's jobs run when the test says (:class:`_Store`), as the GUI's store thread runs them later,
so every step can be seen between two others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.engine_clients.client import EngineDead
from app.services.turn import TurnOptions, Writer
from app.services.turn_flow import TurnFlow
from app.services.turn_start import Answering, NewAnswer, NewMessage
from engine import protocol as p
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.writer_lock import take_writer_lock
from tests.helpers.store_jobs import SentCommands, StoreJobs

WINDOW = Writer("a Hearth window")


@dataclass
class _Screen:
    steps: list[tuple[str, Any]] = field(default_factory=list)

    def turn_started(self, conversation, turn, shown) -> None:
        self.steps.append(("started", shown))

    def turn_event(self, turn, event) -> None:
        self.steps.append(("event", type(event).__name__))

    def turn_stored(self, turn, problem="") -> None:
        self.steps.append(("stored", (turn.answer.status, turn.answer.content, problem)))

    def turn_refused(self, busy, text) -> None:
        self.steps.append(("refused", text))

    def turn_not_saved(self, message, text) -> None:
        self.steps.append(("not saved", (message, text)))


@pytest.fixture
def parts(tmp_path):
    store = StoreJobs(ConversationStore(open_database(database_path(tmp_path))))
    screen, engine = _Screen(), SentCommands()
    return store, screen, engine, TurnFlow(store.submit, engine, screen, WINDOW, lambda store, cid: "rows")


def _begin(flow: TurnFlow, text: str, conversation_id: str | None = None, **options) -> None:
    flow.begin(NewMessage(text, conversation_id, TurnOptions(**options)), Answering("tiny"))


def _finished(rid: str, stored: bool = False) -> p.Finished:
    return p.Finished(request_id=rid, finish_reason="stop", timings=p.Timings(gen_n=2), answer_stored=stored)


def test_a_turn_is_stored_shown_sent_followed_and_its_answer_stored(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    assert flow.busy and not engine.sent, "nothing is sent before the question is stored"
    store.run()
    (command,) = engine.sent
    assert isinstance(command, p.AnswerTurn) and command.keep is not None and command.keep.model == "tiny"
    assert command.keep.writer_token, "the worker may store the answer under the window's writer lock"
    assert screen.steps == [("started", "rows")]
    assert flow.take(p.TokenDelta(request_id=command.request_id, text="Hi", n_tokens=1))
    assert flow.take(p.TokenDelta(request_id=command.request_id, text=" there", n_tokens=1))
    assert flow.take(_finished(command.request_id))
    assert flow.busy, "the answer is being stored"
    store.run()
    assert not flow.busy
    assert screen.steps[1:] == [("event", "TokenDelta"), ("event", "TokenDelta"), ("stored", ("done", "Hi there", ""))]
    (answer,) = [m for m in store.store.current_branch(command.conversation_id) if m.role == "assistant"]
    assert (answer.content, answer.status) == ("Hi there", "done")
    assert not flow.take(_finished(command.request_id)), "an ended turn takes no more events"


def test_an_event_of_another_request_is_not_the_flows(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    assert not flow.take(p.TokenDelta(request_id="load-1", text="x", n_tokens=1))
    assert not flow.take(p.Pong(request_id="ping-1"))
    assert screen.steps == [("started", "rows")]


def test_a_conversation_another_writer_holds_is_refused_and_nothing_is_sent(parts):
    store, screen, engine, flow = parts
    _begin(flow, "First")
    store.run()
    conversation_id = engine.sent[0].conversation_id
    flow.take(_finished(engine.sent[0].request_id))
    store.run()
    other = take_writer_lock(store.store.db, conversation_id, "a `hearth send` command")
    _begin(flow, "Second", conversation_id)
    store.run()
    assert screen.steps[-1] == ("refused", "Second") and len(engine.sent) == 1 and not flow.busy
    other.release(store.store.db)


def test_a_question_the_store_could_not_take_is_given_back(parts):
    store, screen, engine, flow = parts
    store.fail_with = "the disk is full"
    _begin(flow, "Hello")
    store.run()
    assert screen.steps == [("not saved", ("the disk is full", "Hello"))]
    assert not engine.sent and not flow.busy


def test_a_turn_sent_to_a_stopped_engine_ends_interrupted_at_once(parts):
    store, screen, engine, flow = parts
    engine.up = False
    _begin(flow, "Hello")
    store.run()
    assert screen.steps == [("started", "rows"), ("stored", ("interrupted", "", ""))]
    assert not flow.busy


def test_when_the_engine_dies_every_turn_ends_once_with_what_it_wrote(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    rid = engine.sent[0].request_id
    flow.take(p.TokenDelta(request_id=rid, text="Half an", n_tokens=2))
    flow.engine_died(EngineDead(exit_code=-9, message="the engine was killed"))
    flow.engine_died(EngineDead(exit_code=-9, message="the engine was killed"))
    store.run()
    assert screen.steps[-1] == ("stored", ("interrupted", "Half an", ""))
    assert [s for s, _ in screen.steps].count("stored") == 1 and not flow.busy


@pytest.mark.parametrize("shown", [True, False], ids=["shown", "before it is shown"])
def test_stop_cancels_every_answer_being_written(parts, shown):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run() if shown else store.run_jobs()
    flow.stop()
    assert engine.sent[-1] == p.Cancel(request_id=engine.sent[0].request_id)


def test_closing_the_window_stores_what_was_written_marked_interrupted(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    rid, conversation_id = engine.sent[0].request_id, engine.sent[0].conversation_id
    flow.take(p.TokenDelta(request_id=rid, text="Once upon", n_tokens=2))
    flow.abandon("Hearth was closed before the answer was finished")
    assert not flow.turns
    store.run()
    (answer,) = [m for m in store.store.current_branch(conversation_id) if m.role == "assistant"]
    assert (answer.content, answer.status) == ("Once upon", "interrupted")


def test_an_answer_that_could_not_be_stored_still_ends_the_turn(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    flow.take(_finished(engine.sent[0].request_id))
    store.fail_with = "the database is read-only"
    store.run()
    assert screen.steps[-1] == ("stored", ("generating", "", "the database is read-only"))
    assert not flow.busy, "a failed store does not leave the window busy for ever"


def test_an_answer_the_worker_stored_is_shown_from_its_events_and_not_stored_again(parts):
    """The worker stored the answer from the same events the window took: the window shows what it
    made of them, and neither writes the row again nor reads it back (a turn's last step is free)."""
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    command: p.AnswerTurn = engine.sent[0]
    store.store.update_message(command.answer_id, content="Streamed", status="done", stats={"by": "the worker"})
    flow.take(p.TokenDelta(request_id=command.request_id, text="Streamed", n_tokens=1))
    flow.take(_finished(command.request_id, stored=True))
    store.run()
    assert screen.steps[-1] == ("stored", ("done", "Streamed", ""))
    assert store.store.message(command.answer_id).stats == {"by": "the worker"}, "the worker's row is left as it is"


def test_events_that_arrive_before_the_turn_is_shown_wait_for_it(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run_jobs()  # stored and sent from the store's thread; the window has not shown it yet
    (command,) = engine.sent
    assert flow.take(p.TokenDelta(request_id=command.request_id, text="Quick", n_tokens=1))
    assert flow.take(_finished(command.request_id))
    assert screen.steps == [], "nothing is shown before the turn"
    store.run()
    assert screen.steps == [("started", "rows"), ("event", "TokenDelta"), ("stored", ("done", "Quick", ""))]
    assert not flow.busy


def test_a_death_before_the_turn_is_shown_still_ends_it_once(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run_jobs()
    flow.engine_died(EngineDead(exit_code=-9, message="the engine was killed"))
    store.run()
    assert screen.steps == [("started", "rows"), ("stored", ("interrupted", "", ""))]
    assert not flow.busy


def test_a_new_answer_is_stored_beside_the_first_and_sent(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Hello")
    store.run()
    first: p.AnswerTurn = engine.sent[0]
    flow.take(_finished(first.request_id))
    store.run()
    conversation = store.store.get(first.conversation_id)
    user_id = first.messages[-1].id
    flow.begin(NewAnswer(conversation, user_id, TurnOptions()), Answering("tiny"))
    store.run()
    second: p.AnswerTurn = engine.sent[1]
    assert second.answer_id != first.answer_id and second.messages[-1].id == user_id
    assert store.store.versions(conversation.id)[user_id] == [first.answer_id, second.answer_id]


def test_a_new_conversation_keeps_the_thinking_choice_it_was_started_with(parts):
    store, screen, engine, flow = parts
    _begin(flow, "Think about this", enable_thinking=False)
    store.run()
    command: p.AnswerTurn = engine.sent[0]
    assert command.template.enable_thinking is False
    assert store.store.get(command.conversation_id).settings == {"enable_thinking": False}
    assert store.store.get(command.conversation_id).title == "Think about this"
