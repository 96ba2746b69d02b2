"""Two processes on one file, and writers killed mid-save: snapshots are whole or absent."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_store.conversations import ConversationStore
from model_store.db import open_database
from model_store.snapshots import SnapshotStore

ROOT = Path(__file__).resolve().parents[2]

# Saves chained snapshots of 1-3 MiB in a loop and evicts old "recurrent" parts, like the
# worker would; most of its time is spent inside save transactions.
WRITER = """
import os, random, sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from model_store.conversations import ConversationStore
from model_store.db import open_database
from model_store.snapshots import SnapshotStore

db = open_database(Path(sys.argv[1]))
convs, snaps = ConversationStore(db), SnapshotStore(db)
conv = convs.create("writer")
msg = convs.add_message(conv.id, "user", "hi", parent_id=None)
pool = os.urandom(4 << 20)
parent = None
print("ready", flush=True)
while True:
    start = random.randrange(1 << 20)
    parts = {
        "recurrent": pool[start : start + random.randint(1 << 20, 3 << 20)],
        "kv": pool[: random.randint(0, 200_000)],
        "prefill_tokens": b"",
    }
    parent = snaps.save(
        conversation_id=conv.id, message_id=msg.id, identity=msg.identity, parent_id=parent, fingerprint="f",
        format_version=1, n_tokens=1, kv_start=0, text="hi", layout={}, parts=parts,
    ).id
    snaps.evict(12 << 20)
"""


def start_writer(db_path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db_path), str(ROOT)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        pytest.fail(f"writer did not start: {line!r} {proc.stderr.read()}")
    return proc


def write_messages_until(convs: ConversationStore, deadline: float) -> int:
    """The app's side: keep appending messages while the writer saves snapshots."""
    conv = convs.create("app")
    parent, n = None, 0
    while time.monotonic() < deadline:
        parent = convs.add_message(conv.id, "user", f"m{n}", parent_id=parent).id
        n += 1
        time.sleep(0.01)
    return n


def assert_every_snapshot_whole(db) -> int:
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    snaps = SnapshotStore(db)
    ids = [row[0] for row in db.execute("SELECT id FROM snapshots")]
    listed = set()
    for snapshot_id in ids:
        record = snaps.get(snapshot_id)
        for part, size in record.part_bytes.items():
            assert len(snaps.read_part(snapshot_id, part)) == size  # raises if incomplete
            listed.add((snapshot_id, part))
    stored = set(db.execute("SELECT DISTINCT snapshot_id, part FROM snapshot_parts").fetchall())
    assert stored <= listed, "chunks of a part no snapshot lists (a half-dropped part)"
    return len(ids)


@pytest.mark.slow
def test_killed_writers_leave_whole_snapshots(db_path, db):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    convs = ConversationStore(db)
    n_messages = 0
    for attempt in range(20):
        writer = start_writer(db_path)
        n_messages += write_messages_until(convs, time.monotonic() + rng.uniform(0, 0.3))
        writer.send_signal(signal.SIGKILL)
        assert writer.wait(timeout=10) == -signal.SIGKILL, (
            f"seed {seed}, attempt {attempt}: writer died by itself: {writer.stderr.read()}"
        )
        writer.stdout.close()
        writer.stderr.close()

    n_snapshots = assert_every_snapshot_whole(db)
    assert n_snapshots > 0, f"seed {seed}: no snapshot was ever committed"
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == n_messages + 20
    # A fresh connection (as after a restart) sees the same consistent file.
    fresh = open_database(db_path)
    try:
        assert assert_every_snapshot_whole(fresh) == n_snapshots
    finally:
        fresh.close()
