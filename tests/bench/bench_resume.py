"""Time to first token when a saved conversation is resumed from its snapshot vs read again.

For each length, a conversation whose first message has about that many tokens is answered once
(which saves the turn-end snapshot). Then, in a fresh engine, the next message is sent twice: once
with the snapshot (restore + read the new message) and once with the snapshots deleted (read the
whole conversation again). Time to first token is measured by the caller, from sending the request
to the first token delta. A third run opens the conversation first (the engine restores the snapshot
then, as the GUI asks it to when a conversation is selected) and times only the message. The restore
at open is timed in fresh worker processes with the database's pages in the OS page cache ("warm",
a conversation used recently) and dropped from it ("cold": read from disk, as after the OS evicted
them; Linux does so to files left unused, and this machine's DAMON reclaim within minutes). Before
each timed open, memory the size of the state is touched and freed (:func:`prime_memory`): this VM
hands freed memory back to its host (virtio-balloon free page reporting), and a process that touches
such memory waits for the host to back it, about 20x slower than memory the host still backs
(``--memory-check 87``), which would otherwise decide which mode the median lands in. Also reports
the snapshot's bytes, split into the fixed recurrent part and the growing KV part. Prints one JSON
object.
Usage: ``python tests/bench/bench_resume.py [--models smollm2,hybrid-bench] [--lengths 1024,4096,...] [--repeats 5]``;
``--memory-check MIB`` only measures that host cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.services.turn import open_conversation, send_turn  # noqa: E402
from engine import protocol as p  # noqa: E402
from app.engine_clients.client import EngineClient  # noqa: E402
from app.engine_clients.inproc_client import InprocClient  # noqa: E402
from app.engine_clients.process_client import ProcessClient  # noqa: E402
from engine.models.model_files import embedded_model_path  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from model_store.conversations import ConversationStore  # noqa: E402
from model_store.db import database_path, open_database  # noqa: E402
from model_store.snapshots import SnapshotStore  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

WORDS = ("river stone light house garden winter market letter window music paper forest "
         "bridge candle morning harbor orchard valley meadow lantern").split()
GREEDY = p.SamplingSpec(temperature=0)


def long_text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words)) + "\nSummarise this in one line."


def timed_turn(client, store, conversation_id: str, text: str) -> tuple[float, p.Finished]:
    sent = time.perf_counter()
    first: list[float] = []

    def on_event(event):  # the first token (an empty delta when it ended the answer at once)
        if isinstance(event, (p.TokenDelta, p.Finished)) and not first:
            first.append(time.perf_counter())

    result = send_turn(store, client, conversation_id, text, sampling=GREEDY, max_tokens=4, on_event=on_event)
    assert result.finished is not None and not result.errors, result.errors
    return (first[0] - sent) * 1000, result.finished


def tokens_per_word(model: Path) -> float:
    session = open_session(str(model), n_ctx=256)
    try:
        return len(raw_prompt_tokens(session.model, long_text(2000, 0))) / 2000
    finally:
        session.close()


def fresh_client(model: Path, data_dir: Path, n_ctx: int, process: bool = False) -> EngineClient:
    client = ProcessClient(data_dir=data_dir) if process else InprocClient(telemetry_interval_ms=0, data_dir=data_dir)
    client.start()
    if process:
        client.send(p.SetTelemetry(interval_ms=0))
    client.load_model(str(model), n_ctx=n_ctx)
    return client


PAGE_CACHE = """
import os, sys
state, names = sys.argv[1], sys.argv[2:]
for name in names:
    if not os.path.exists(name):
        continue
    with open(name, "rb") as file:
        if state == "warm":
            while file.read(16 << 20):
                pass
        else:
            os.fsync(file.fileno())
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
"""


def set_page_cache(path: Path, state: str) -> None:
    """Make the database file's pages all cached ("warm": read it through) or all uncached ("cold":
    ask the kernel to drop them, as it does by itself to files left unused for a while). Done in a
    child process: closing a file descriptor on the database here would drop every POSIX lock this
    process's SQLite connections hold on it (SQLite's documented hazard), and a connection opened
    afterwards fails with "disk I/O error"."""
    names = [str(path), str(path.with_name(path.name + "-wal"))]
    subprocess.run([sys.executable, "-c", PAGE_CACHE, state, *names], check=True)


def prime_memory(nbytes: int) -> None:
    """Touch and free ``nbytes`` of memory, so that the next process to allocate that much gets pages
    the host already backs (see :func:`memory_check` for what that changes on this VM)."""
    touched = np.ones(nbytes, dtype=np.uint8)
    del touched


TOUCH = "import time, numpy as np; t = time.perf_counter(); np.ones({n}, np.uint8); print(time.perf_counter() - t)"


def memory_check(mib: int, idle_s: float, repeats: int) -> dict:
    """Time a fresh process touching ``mib`` MiB after ``idle_s`` idle seconds, with and without
    :func:`prime_memory` just before: the cost the host adds to memory it took back."""
    times: dict[str, list[float]] = {"idle": [], "primed": []}
    for _ in range(repeats):
        for mode in times:
            time.sleep(idle_s)
            if mode == "primed":
                prime_memory(2 * mib << 20)
            out = subprocess.run([sys.executable, "-c", TOUCH.format(n=mib << 20)], capture_output=True, text=True,
                                 check=True).stdout
            times[mode].append(round(float(out) * 1000, 1))
    return {"bench": "fresh_memory", "mib": mib, "idle_s": idle_s, "touch_ms": times,
            "idle_over_primed": round(statistics.median(times["idle"]) / statistics.median(times["primed"]), 1)}


def bench_length(model: Path, words: int, n_ctx: int, work: Path, repeats: int) -> dict:
    data_dir = work / f"len-{words}"
    store = ConversationStore(open_database(database_path(data_dir)))
    conversation = store.create("bench")
    client = fresh_client(model, data_dir, n_ctx)
    _, first = timed_turn(client, store, conversation.id, long_text(words, words))
    client.close()
    snapshots = SnapshotStore(store.db)
    sizes = snapshots.conversation_bytes(conversation.id)
    branch = store.current_branch(conversation.id)
    # resume: a fresh engine, the snapshot on disk, restored when the message is sent
    client = fresh_client(model, data_dir, n_ctx)
    resume_ms, resumed = timed_turn(client, store, conversation.id, "And in one word?")
    client.close()
    # resume as the GUI does it: the snapshot is restored when the conversation is opened; the
    # restore alone is timed `repeats` times, each in a fresh worker process as in the app (an
    # engine thread in this process reuses the memory the last one freed, which hides the cost of a
    # new process touching its buffers), and the median reported
    open_times: dict[str, list[float]] = {"warm": [], "cold": []}
    for attempt in range(2 * repeats):
        cache = "cold" if attempt % 2 else "warm"
        store.set_leaf(conversation.id, branch[-1].id)
        client = fresh_client(model, data_dir, n_ctx, process=True)
        set_page_cache(database_path(data_dir), cache)
        prime_memory(2 * sum(sizes.values()) + (64 << 20))
        opened_at = time.perf_counter()
        open_conversation(store, client, conversation.id)
        open_times[cache].append((time.perf_counter() - opened_at) * 1000)
        if attempt < 2 * repeats - 1:
            client.close()
    open_ms = statistics.median(open_times["warm"])
    opened_ms, after_open = timed_turn(client, store, conversation.id, "And in one word?")
    client.close()
    # re-read: the same conversation state (same leaf), no snapshots
    store.set_leaf(conversation.id, branch[-1].id)
    store.db.execute("delete from snapshots")
    store.db.conn.commit()
    client = fresh_client(model, data_dir, n_ctx)
    reread_ms, reread = timed_turn(client, store, conversation.id, "And in one word?")
    client.close()
    assert resumed.snapshot.restored and after_open.snapshot.restored and not reread.snapshot.restored
    return {
        "conversation_tokens": first.timings.prompt_n + first.timings.gen_n + 1,
        "resume_ttft_ms": round(resume_ms, 1),
        "reread_ttft_ms": round(reread_ms, 1),
        "speedup": round(reread_ms / resume_ms, 1),
        "open_restore_ms": round(open_ms, 1),
        "open_restore_runs_ms": [round(t, 1) for t in open_times["warm"]],
        "open_restore_cold_ms": round(statistics.median(open_times["cold"]), 1),
        "open_restore_cold_runs_ms": [round(t, 1) for t in open_times["cold"]],
        "ttft_after_open_ms": round(opened_ms, 1),
        "speedup_after_open": round(reread_ms / opened_ms, 1),
        "resume_read_tokens": resumed.snapshot.prefilled_tokens,
        "reread_read_tokens": reread.snapshot.prefilled_tokens,
        "same_first_tokens": resumed.token_ids == reread.token_ids,
        "snapshot_fixed_bytes": sizes.get("recurrent", 0),
        "snapshot_kv_bytes": sizes.get("kv", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="smollm2,hybrid-bench")
    parser.add_argument("--lengths", default="1024,4096,8192,16384,32768", help="target conversation tokens")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--repeats", type=int, default=5, help="fresh-engine restores timed per length (median)")
    parser.add_argument("--memory-check", type=int, metavar="MIB",
                        help="only time touching MIB MiB of fresh memory after idling, primed or not")
    args = parser.parse_args()
    if args.memory_check:
        print(json.dumps(memory_check(args.memory_check, idle_s=10, repeats=3), indent=2))
        return
    wanted = args.models.split(",")
    paths = {"smollm2": embedded_model_path()}
    generated = [n for n in wanted if n != "smollm2"]
    if generated:
        paths.update(make_models(args.cache, generated))
    trained = {"smollm2": 8192, "hybrid-bench": 32768, "transformer-bench": 32768}
    work = Path(tempfile.mkdtemp(prefix="hearth-bench-resume-"))
    results = []
    try:
        for name in wanted:
            for target in map(int, args.lengths.split(",")):
                if target > trained.get(name, 8192):
                    continue
                words = int(target * 0.9 / tokens_per_word(paths[name]))
                row = bench_length(paths[name], words, min(trained.get(name, 8192), target + 512), work, args.repeats)
                row.update(model=name, target_tokens=target)
                results.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"bench": "resume", "results": results}, indent=2))


if __name__ == "__main__":
    main()
