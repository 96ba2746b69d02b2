"""The worker stores the answer it writes (``AnswerTurn.keep``), exactly as the app would have, and lets
the conversation's next writer in; where it cannot (the writer lock is gone), it stores nothing and the
app's own store says why, as before. A real worker process, a real database file."""

from __future__ import annotations

import pytest

from app.engine_clients.process_client import ProcessClient
from app.services.turn import TurnOptions, Writer, end_answer, start_regeneration, start_turn
from engine import protocol as p
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.writer_lock import WriterLockLost, holder_of

GREEDY = TurnOptions(sampling=p.SamplingSpec(temperature=0), max_tokens=12, draft="off")
WRITER = Writer("a test")


@pytest.fixture
def worker(tmp_path, hybrid_tiny):
    client = ProcessClient(data_dir=tmp_path)
    client.start()
    client.load_model(str(hybrid_tiny))
    yield client
    client.close()


@pytest.fixture
def store(tmp_path):
    db = open_database(database_path(tmp_path))
    yield ConversationStore(db)
    db.close()


def run(client, turn, command):
    for event in client.stream(command, timeout=120):
        turn.feed(event)
    assert turn.finished is not None, turn.errors
    return turn.finished


def kept_fields(message):
    stats = {key: value for key, value in message.stats.items() if key != "elapsed_s"}
    return (message.content, message.status, message.finish, message.error, message.reasoning, message.identity,
            sorted(stats), stats.get("model"), sorted(stats["timings"]))


def test_the_worker_stores_the_answer_as_the_app_would_and_lets_the_next_writer_in(worker, store):
    conversation, turn = start_turn(store, None, "Tell me about the sea.", GREEDY, WRITER, title="Sea")
    turn.model = "hybrid-tiny"
    finished = run(worker, turn, turn.outgoing())

    assert finished.answer_stored, "the worker said it stored the answer"
    stored = store.message(turn.answer.id)
    assert (stored.status, stored.content) == ("done", turn.text) and turn.text, stored
    assert stored.stats["model"] == "hybrid-tiny" and stored.stats["snapshot"]["saved_bytes"] > 0
    assert holder_of(store.db, conversation.id) is None, "the next writer may come in"
    shown = end_answer(store, turn).answer  # what the app made of the same events, not read back
    assert kept_fields(shown) == kept_fields(stored) and shown.stats["timings"] == stored.stats["timings"]
    assert turn.writer is None

    # The same answer again, stored by the app from the same events: the same fields.
    again = start_regeneration(store, conversation.id, turn.user.id, GREEDY, WRITER)
    again.model = "hybrid-tiny"
    assert not run(worker, again, again.command).answer_stored, "no keep: the worker left it to the app"
    assert store.message(again.answer.id).status == "generating"
    by_app = end_answer(store, again).answer
    assert kept_fields(by_app) == kept_fields(stored)
    assert holder_of(store.db, conversation.id) is None


def test_a_stopped_answer_is_stored_stopped_with_what_was_written(worker, store):
    options = TurnOptions(sampling=p.SamplingSpec(temperature=0), max_tokens=4000, draft="off")
    _, turn = start_turn(store, None, "Tell me a long story.", options, WRITER, title="Story")
    rid = turn.command.request_id
    worker.send(turn.outgoing())
    while (event := worker.next_event(timeout=120)) is not None:
        if isinstance(event, p.TokenDelta) and event.request_id == rid and not turn.n_deltas:
            worker.send(p.Cancel(request_id=rid))
        if getattr(event, "request_id", None) == rid and turn.feed(event):
            break
    assert turn.finished.finish_reason == "cancelled" and turn.finished.answer_stored
    stored = end_answer(store, turn).answer
    assert (stored.status, stored.content) == ("stopped", turn.text) and turn.text


def test_a_writer_lock_gone_before_the_end_leaves_the_answer_to_the_app_which_refuses_it(worker, store):
    conversation, turn = start_turn(store, None, "Tell me about the sea.", GREEDY, WRITER, title="Sea")
    store.db.execute("DELETE FROM writer_locks WHERE conversation_id = ?", [conversation.id])
    store.db.conn.commit()
    finished = run(worker, turn, turn.outgoing())

    assert not finished.answer_stored and store.message(turn.answer.id).status == "generating"
    with pytest.raises(WriterLockLost, match="so this answer was not saved"):
        end_answer(store, turn)
    assert store.message(turn.answer.id).content == "", "neither side stored it"
