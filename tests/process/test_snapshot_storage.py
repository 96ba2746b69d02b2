"""How snapshots use the disk: KV stored once per token, and whole-or-absent under kill -9."""

import os
import random
import signal
import threading
import time

import pytest

from app.services.turn import send_turn
from engine import protocol as p
from app.engine_clients.client import EngineError
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore
from tests.helpers.snapshot_chat import USER_MESSAGES, Chat

pytestmark = pytest.mark.process


@pytest.mark.parametrize("model_fixture", ["hybrid_tiny", "smollm2"])
def test_stored_bytes_grow_with_tokens_not_turns_times_tokens(request, tmp_path, model_fixture):
    chat = Chat(tmp_path, str(request.getfixturevalue(model_fixture)))
    chat.start_worker()
    for text in USER_MESSAGES * 2:  # ten turns
        chat.say(text, max_tokens=16)
    chat.stop_worker()
    snapshots = SnapshotStore(chat.store.db)
    leaf = chat.store.current_branch(chat.conversation.id)[-1]
    chain = snapshots.chain(snapshots.for_message(leaf.id)[0].id)
    assert len(chain) == 10
    n_tokens = chain[0].n_tokens
    per_part = snapshots.conversation_bytes(chat.conversation.id)
    cell_bytes = per_part["kv"] / n_tokens
    assert per_part["kv"] == sum(r.part_bytes["kv"] for r in chain)
    assert all(r.part_bytes["kv"] == (r.n_tokens - r.kv_start) * cell_bytes for r in chain)  # each token once
    stored_per_turn_copy = sum(r.n_tokens for r in chain) * cell_bytes  # what storing whole KVs would cost
    assert per_part["kv"] < stored_per_turn_copy / 4
    if "recurrent" in per_part:  # the fixed part, once per turn, the same size every time
        assert len({r.part_bytes["recurrent"] for r in chain}) == 1


KILL_ROUNDS = 12


def wait_for_a_snapshot(data_dir, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        db = open_database(database_path(data_dir))
        try:
            if db.execute("select count(*) from snapshots").fetchone()[0]:
                return
        finally:
            db.close()
        time.sleep(0.1)
    raise AssertionError(f"no turn ended within {timeout} s")


def test_kill_9_while_saving_leaves_every_snapshot_whole_or_absent(tmp_path, smollm2):
    chat = Chat(tmp_path, str(smollm2))
    rng = random.Random(1234)
    for round_ in range(KILL_ROUNDS):
        chat.start_worker()
        stop = threading.Event()

        def talk():
            store = ConversationStore(open_database(database_path(tmp_path)))  # connections are per thread
            try:
                while not stop.is_set():
                    send_turn(store, chat.client, chat.conversation.id, rng.choice(USER_MESSAGES),
                              sampling=p.SamplingSpec(temperature=0), max_tokens=48)
            except (EngineError, OSError):
                pass  # the worker was killed under us

        talker = threading.Thread(target=talk, daemon=True)
        talker.start()
        if round_ == 0:  # one whole turn first, however busy the machine: the check below needs a snapshot
            wait_for_a_snapshot(tmp_path, timeout=300)
        time.sleep(rng.uniform(0.05, 1.2))
        os.kill(chat.client.pid, signal.SIGKILL)
        stop.set()
        talker.join(10)
        chat.client.close(mode="abort")
        chat.client = None
    db = open_database(database_path(tmp_path))
    assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
    store = SnapshotStore(db)
    rows = [store.get(row[0]) for row in db.execute("select id from snapshots").fetchall()]
    assert rows, "some turns must have completed"
    for record in rows:
        for part, size in record.part_bytes.items():
            assert len(store.read_part(record.id, part)) == size
    statuses = {m.status for m in ConversationStore(db).branch(ConversationStore(db).get(chat.conversation.id).leaf_id)}
    assert statuses <= {"done", "generating", "stopped", "interrupted", "error"}
