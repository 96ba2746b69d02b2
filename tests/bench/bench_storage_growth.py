"""How a long conversation's storage grows, turn by turn: the data folder, and inside the database the
snapshot rows (their own columns), their token records, the state files beside it and the messages, at turns 10, 100 and 200 (issue 34's measure:
it should grow linearly, by about the same bytes per turn early and late).

A 200-turn conversation with the tiny hybrid model, driven through a real worker process and the real
store (``app.services.turn.send_turn``), greedy, short questions and 8-token answers. ``per_turn``
gives the bytes each part gained per turn over turns 1-10, 11-100 and 101-200.
Prints one JSON object.
Usage: ``python tests/bench/bench_storage_growth.py [--turns 200]``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.services.turn import send_turn  # noqa: E402
from engine import protocol as p  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402
from model_store.conversations import ConversationStore  # noqa: E402
from model_store.db import database_path, open_database  # noqa: E402
from model_store.state_files import FOLDER_NAME  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

QUESTIONS = ["Hello, who are you?", "Tell me about rivers.", "Why is the sky blue?", "Name three fruits.",
             "What is a mill?", "And the park?", "Say that again.", "Thanks."]
MARKS = (10, 100, 200)


def sizes(data_dir: Path) -> dict[str, int]:
    """Bytes of the data folder's files (its write-ahead log folded in first), and of each kind of row in
    its database: a snapshot row's own columns, its state parts, the messages."""
    db = sqlite3.connect(database_path(data_dir))
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # else the folder's size is the log's, growing in steps
        folder = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())

        def total(sql: str) -> int:
            return db.execute(sql).fetchone()[0] or 0

        columns = [row[1] for row in db.execute("PRAGMA table_info(snapshots)")]
        row_bytes = " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
        return {"folder": folder,
                "database_file": total("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size"),
                "snapshot_rows": total(f"SELECT sum({row_bytes}) FROM snapshots"),
                "snapshot_parts": total("SELECT sum(length(data)) FROM snapshot_parts"),  # the token records
                "state_files": sum(f.stat().st_size for f in (data_dir / FOLDER_NAME).glob("*")),
                "messages": total("SELECT sum(length(CAST(content AS BLOB))) FROM messages"),
                "snapshots": total("SELECT count(*) FROM snapshots")}
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=MARKS[-1])
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    args = parser.parse_args()
    model = str(make_models(args.cache, ["hybrid-tiny"])["hybrid-tiny"])
    marks = [m for m in MARKS if m <= args.turns] or [args.turns]
    with tempfile.TemporaryDirectory(prefix="hearth-storage-") as folder:
        data_dir = Path(folder)
        store = ConversationStore(open_database(database_path(data_dir)))
        conversation = store.create("storage growth", model=model)
        client = ProcessClient(data_dir=data_dir)
        client.start()
        client.load_model(model)
        measured, prefilled = {0: sizes(data_dir)}, []
        try:
            for turn in range(1, marks[-1] + 1):
                result = send_turn(store, client, conversation.id, QUESTIONS[turn % len(QUESTIONS)],
                                   sampling=p.SamplingSpec(temperature=0), max_tokens=8)
                if result.errors or result.finished is None:
                    raise SystemExit(f"turn {turn} failed: {result.errors}")
                snapshot = result.finished.snapshot or p.SnapshotReport()
                prefilled.append(snapshot.prefilled_tokens)
                if turn in marks:
                    measured[turn] = sizes(data_dir) | {"context_tokens": snapshot.restored_tokens
                                                        + snapshot.prefilled_tokens + result.finished.timings.gen_n}
        finally:
            client.close()
            store.db.close()
    bounds = [0, *marks]
    per_turn = {f"{a + 1}-{b}": {k: round((measured[b][k] - measured[a][k]) / (b - a)) for k in measured[0]}
                | {"prefilled_tokens": round(sum(prefilled[a:b]) / (b - a), 1)} for a, b in zip(bounds, bounds[1:])}
    print(json.dumps({"bench": "storage_growth", "model": "hybrid-tiny", "turns": marks[-1],
                      "at": {str(t): measured[t] for t in marks}, "per_turn": per_turn}, indent=2))


if __name__ == "__main__":
    main()
