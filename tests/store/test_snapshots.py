"""Snapshot parts: chunked round trips, corruption detection, chains, lookup and eviction."""

from __future__ import annotations

import hashlib
import json
import os
import time
import tracemalloc

import pytest
import xxhash

from model_store.db import StoreError
from model_store.snapshots import CHUNK_BYTES, SnapshotCorrupt
from model_store.state_files import ORPHAN_AGE_S

KIB = 1024


@pytest.fixture
def conv(convs):
    return convs.create("snapshots")


@pytest.fixture
def msg(convs, conv):
    return convs.add_message(conv.id, "user", "hello", parent_id=None)


@pytest.fixture
def save(convs, snaps, conv, msg):
    def save(parts, parent_id=None, fingerprint="fp", message_id=None, **extra):
        owner = convs.message(message_id) if message_id else msg
        fields = dict(
            conversation_id=conv.id, message_id=owner.id, identity=owner.identity, parent_id=parent_id,
            fingerprint=fingerprint, format_version=1, n_tokens=7, kv_start=0, text="hello",
            layout={"n_layers": 2},
        )
        return snaps.save(**{**fields, **extra}, parts=parts)

    return save


def chunk_count(db, snapshot_id, part):
    sql = "SELECT count(*) FROM snapshot_parts WHERE snapshot_id = ? AND part = ?"
    return db.execute(sql, [snapshot_id, part]).fetchone()[0]


def test_round_trip_of_multi_chunk_and_empty_parts(db, snaps, save):
    big = os.urandom(5 * CHUNK_BYTES // 2)
    exact = os.urandom(CHUNK_BYTES)
    rec = save({"recurrent": big, "kv": exact, "prefill_tokens": b"", "decoded": b"\x01\x02", "history": big})

    assert snaps.read_part(rec.id, "recurrent") == big == snaps.read_part(rec.id, "history")
    assert snaps.read_part(rec.id, "kv") == exact
    assert snaps.read_part(rec.id, "prefill_tokens") == b""
    assert snaps.read_part(rec.id, "decoded") == b"\x01\x02"
    assert [chunk_count(db, rec.id, p) for p in ("history", "decoded", "prefill_tokens")] == [3, 1, 0]
    assert [chunk_count(db, rec.id, p) for p in ("recurrent", "kv")] == [0, 0]  # files beside the database
    assert snaps.files.path(rec.checksums["recurrent"]).read_bytes() == big
    assert rec.part_bytes == {"recurrent": len(big), "kv": CHUNK_BYTES, "prefill_tokens": 0,
                              "decoded": 2, "history": len(big)}
    assert rec.checksums["recurrent"] == "xxh3-128:" + xxhash.xxh3_128_hexdigest(big)
    assert snaps.get(rec.id) == rec
    assert rec.has_part("kv") and not rec.has_part("nope")
    assert rec.layout == {"n_layers": 2} and rec.nbytes == 2 * len(big) + CHUNK_BYTES + 2


def test_parts_accept_bytearray_and_memoryview(snaps, save):
    data = bytearray(os.urandom(CHUNK_BYTES + 5))
    rec = save({"a": data, "b": memoryview(data)[3:9]})
    assert snaps.read_part(rec.id, "a") == data
    assert snaps.read_part(rec.id, "b") == data[3:9]


def test_read_memory_stays_bounded(snaps, save):
    size = 12 * CHUNK_BYTES
    rec = save({"recurrent": os.urandom(size)})
    tracemalloc.start()
    try:
        data = snaps.read_part(rec.id, "recurrent")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) == size
    # the result plus the few chunks in flight (read, waiting for the hash thread, being hashed)
    assert peak < size + 5 * CHUNK_BYTES, peak


def test_checksum_mismatch_names_the_part(db, snaps, save):
    rec = save({"history": os.urandom(2 * CHUNK_BYTES + 10), "decoded_tokens": b"fine"})
    (chunk,) = db.execute(
        "SELECT data FROM snapshot_parts WHERE snapshot_id = ? AND part = 'history' AND seq = 1",
        [rec.id],
    ).fetchone()
    flipped = bytearray(chunk)
    flipped[1234] ^= 0xFF
    db.execute(
        "UPDATE snapshot_parts SET data = ? WHERE snapshot_id = ? AND part = 'history'"
        " AND seq = 1",
        [bytes(flipped), rec.id],
    )
    with pytest.raises(SnapshotCorrupt) as err:
        snaps.read_part(rec.id, "history")
    assert err.value.part == "history" and err.value.snapshot_id == rec.id
    assert "checksum" in err.value.reason
    assert rec.id in str(err.value) and "'history'" in str(err.value)
    assert snaps.read_part(rec.id, "decoded_tokens") == b"fine"


@pytest.mark.parametrize("damaged", [False, True])
def test_snapshots_written_with_sha256_checksums_are_still_checked(db, snaps, save, damaged):
    """Snapshots from before the XXH3 checksums keep their SHA-256 digests; they read, or are refused."""
    data = os.urandom(CHUNK_BYTES + 77)
    rec = save({"history": data})
    legacy = {"history": hashlib.sha256(data if not damaged else data[:-1] + b"!").hexdigest()}
    db.execute("UPDATE snapshots SET checksums = ? WHERE id = ?", [json.dumps(legacy), rec.id])
    if damaged:
        with pytest.raises(SnapshotCorrupt, match="checksum"):
            snaps.read_part(rec.id, "history")
    else:
        assert snaps.read_part(rec.id, "history") == data


@pytest.mark.parametrize("seq", [0, 1, 2])
def test_missing_chunk_is_detected(db, snaps, save, seq):
    rec = save({"history": os.urandom(2 * CHUNK_BYTES + 10)})
    db.execute(
        "DELETE FROM snapshot_parts WHERE snapshot_id = ? AND part = 'history' AND seq = ?",
        [rec.id, seq],
    )
    with pytest.raises(SnapshotCorrupt, match=f"chunk {seq} is missing") as err:
        snaps.read_part(rec.id, "history")
    assert err.value.part == "history"


@pytest.mark.parametrize(
    "new_data", ["substr(data, 1, 100)", "CAST(data || x'00' AS BLOB)", "data || x'00'"]
)
def test_size_mismatch_is_detected(db, snaps, save, new_data):
    rec = save({"history": os.urandom(CHUNK_BYTES + 500)})
    db.execute(
        f"UPDATE snapshot_parts SET data = {new_data} WHERE snapshot_id = ? AND seq = 1", [rec.id]
    )
    with pytest.raises(SnapshotCorrupt, match="size mismatch"):
        snaps.read_part(rec.id, "history")


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "remove", "symlink"])
def test_a_damaged_missing_or_replaced_state_file_is_refused_by_name(snaps, save, tmp_path, damage):
    data = os.urandom(2 * CHUNK_BYTES + 10)
    rec = save({"recurrent": data, "kv": b"fine"})
    path = snaps.files.path(rec.checksums["recurrent"])
    if damage == "flip":
        changed = bytearray(data)
        changed[CHUNK_BYTES + 7] ^= 0xFF
        path.write_bytes(changed)
    elif damage == "truncate":
        path.write_bytes(data[:-3])
    elif damage == "extend":
        path.write_bytes(data + b"!")
    elif damage == "remove":
        path.unlink()
    else:  # a link to a file with the very bytes expected is still not followed
        (tmp_path / "elsewhere").write_bytes(data)
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere")
    reason = {"flip": "checksum", "truncate": "missing|size mismatch", "extend": "size mismatch",
              "remove": "its file is missing", "symlink": "cannot be read"}[damage]
    with pytest.raises(SnapshotCorrupt, match=reason) as err:
        snaps.read_part(rec.id, "recurrent")
    assert err.value.part == "recurrent" and err.value.snapshot_id == rec.id
    assert snaps.read_part(rec.id, "kv") == b"fine"


def test_state_files_are_private_and_shared_by_content(db, snaps, save, convs, conv):
    first = save({"recurrent": b"same" * 1000})
    second = save({"recurrent": b"same" * 1000}, message_id=convs.add_message(conv.id, "user", "b", parent_id=None).id)
    path = snaps.files.path(first.checksums["recurrent"])
    assert first.checksums == second.checksums and list(snaps.files.folder.iterdir()) == [path]
    assert (path.stat().st_mode & 0o777, snaps.files.folder.stat().st_mode & 0o777) == (0o600, 0o700)
    snaps.drop_part(first.id, "recurrent")
    assert path.exists(), "the other snapshot still names it"
    snaps.drop_part(second.id, "recurrent")
    assert not path.exists()


def test_a_file_a_crash_left_without_its_row_is_swept_once_old(snaps, save):
    kept = save({"recurrent": b"kept"})
    orphan = snaps.files.folder / ("ab" * 16)
    orphan.write_bytes(b"left by a crash")
    fresh = snaps.files.folder / ("cd" * 16)
    fresh.write_bytes(b"a save on its way to its row")
    old = time.time() - 2 * ORPHAN_AGE_S
    for path in (orphan, snaps.files.path(kept.checksums["recurrent"])):
        os.utime(path, (old, old))
    assert snaps.sweep_files() == 1
    assert not orphan.exists() and fresh.exists() and snaps.read_part(kept.id, "recurrent") == b"kept"


def test_reading_an_absent_part_or_snapshot(snaps, save):
    rec = save({"kv": b"x"})
    with pytest.raises(SnapshotCorrupt, match="not stored"):
        snaps.read_part(rec.id, "recurrent")
    with pytest.raises(SnapshotCorrupt, match="does not exist"):
        snaps.read_part("ghost", "kv")
    assert snaps.get("ghost") is None


def test_save_refuses_dangling_references_and_writes_nothing(db, snaps, save, convs):
    other = convs.create("other")
    with pytest.raises(StoreError, match="no message"):
        save({"kv": b"x"}, message_id="ghost")
    with pytest.raises(StoreError, match="no message"):
        save({"kv": b"x"}, conversation_id=other.id)
    with pytest.raises(StoreError, match="no parent snapshot"):
        save({"kv": b"x"}, parent_id="ghost")
    assert db.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM snapshot_parts").fetchone()[0] == 0


def test_chain_walks_to_the_root(snaps, save):
    s1 = save({"kv": b"1"})
    s2 = save({"kv": b"2"}, parent_id=s1.id)
    s3 = save({"kv": b"3"}, parent_id=s2.id)
    save({"kv": b"4"}, parent_id=s2.id)
    assert [r.id for r in snaps.chain(s3.id)] == [s3.id, s2.id, s1.id]
    assert [r.id for r in snaps.chain(s1.id)] == [s1.id]
    assert snaps.chain("ghost") == []


def test_find_prefers_newest_and_matches_fingerprint(convs, conv, snaps, save):
    other_msg = convs.add_message(conv.id, "assistant", "x", parent_id=None)
    old_a = save({"kv": b"old"}, fingerprint="A")
    b = save({"kv": b"b"}, fingerprint="B")
    new_a = save({"kv": b"new"}, fingerprint="A")
    save({"kv": b"other"}, fingerprint="A", message_id=other_msg.id)
    assert snaps.find(old_a.identity, "A") == new_a
    assert snaps.find(old_a.identity, "B") == b
    assert snaps.find(old_a.identity, "C") is None
    assert snaps.made_for_other_models(old_a.identity, "C") and snaps.made_for_other_models(old_a.identity, "A")
    assert not snaps.made_for_other_models(other_msg.identity, "A")  # it has snapshots of this model only
    assert old_a.identity == convs.message(old_a.message_id).identity != other_msg.identity
    assert [r.id for r in snaps.for_message(old_a.message_id)] == [new_a.id, b.id, old_a.id]
    assert snaps.for_message("ghost") == []


def test_touch_updates_last_used(snaps, save):
    rec = save({"kv": b"x"})
    snaps.touch(rec.id)
    assert snaps.get(rec.id).last_used_at > rec.last_used_at


def test_drop_part_updates_totals(db, conv, snaps, save):
    rec = save({"recurrent": os.urandom(CHUNK_BYTES + 1), "kv": b"k" * 100})
    assert snaps.total_bytes() == CHUNK_BYTES + 101
    assert snaps.conversation_bytes(conv.id) == {"kv": 100, "recurrent": CHUNK_BYTES + 1}

    assert snaps.drop_part(rec.id, "recurrent") == CHUNK_BYTES + 1

    assert snaps.total_bytes() == 100
    assert snaps.conversation_bytes(conv.id) == {"kv": 100}
    after = snaps.get(rec.id)
    assert after.part_bytes == {"kv": 100} and list(after.checksums) == ["kv"]
    assert chunk_count(db, rec.id, "recurrent") == 0
    assert snaps.read_part(rec.id, "kv") == b"k" * 100
    assert snaps.drop_part(rec.id, "recurrent") == 0
    assert snaps.drop_part("ghost", "kv") == 0


def test_conversation_bytes_sums_per_part(convs, conv, snaps, save):
    save({"recurrent": b"r" * 10, "kv": b"k" * 3})
    save({"recurrent": b"r" * 5})
    other = convs.create("other")
    other_msg = convs.add_message(other.id, "user", "x", parent_id=None)
    save({"recurrent": b"r" * 1000}, conversation_id=other.id, message_id=other_msg.id)
    assert snaps.conversation_bytes(conv.id) == {"kv": 3, "recurrent": 15}
    assert snaps.total_bytes() == 1018
    assert snaps.conversation_bytes("ghost") == {}


def set_last_used(db, order):
    for t, rec in enumerate(order):
        db.execute("UPDATE snapshots SET last_used_at = ? WHERE id = ?", [1000.0 + t, rec.id])


def test_evict_drops_lru_inner_snapshots_and_keeps_leaves(db, snaps, save):
    r, k = 100 * KIB, 10 * KIB
    s1 = save({"recurrent": os.urandom(r), "kv": os.urandom(k)})
    s2 = save({"recurrent": os.urandom(r), "kv": os.urandom(k)}, parent_id=s1.id)
    s3 = save({"recurrent": os.urandom(r), "kv": os.urandom(k)}, parent_id=s2.id)
    s4 = save({"recurrent": os.urandom(r), "kv": os.urandom(k)}, parent_id=s3.id)  # leaf
    s5 = save({"recurrent": os.urandom(r), "kv": os.urandom(k)}, parent_id=s2.id)  # leaf
    # Least recently used first: the leaves s4 and s5 are the oldest, yet must survive.
    set_last_used(db, [s4, s5, s3, s1, s2])
    total = snaps.total_bytes()
    assert total == 5 * (r + k)

    assert snaps.evict(total) == []
    assert snaps.evict(total - r - 1) == [s3.id, s1.id]
    assert snaps.total_bytes() == total - 2 * r
    assert snaps.get(s2.id).has_part("recurrent")

    assert snaps.evict(0) == [s2.id]  # nothing else may go: only leaves still have it
    for leaf in (s4, s5):
        assert snaps.read_part(leaf.id, "recurrent")
    for rec in (s1, s2, s3, s4, s5):
        assert len(snaps.read_part(rec.id, "kv")) == k
    assert snaps.total_bytes() == 5 * k + 2 * r
    assert snaps.evict(0, part="kv") == [s3.id, s1.id, s2.id]
    assert snaps.total_bytes() == 2 * (r + k)


def test_a_snapshot_row_keeps_its_texts_length_and_digest_not_the_text(db, save):
    short, long_ = "hello", "a whole document " * 60_000
    records = [save({"kv": b"x"}, text=short), save({"kv": b"x"}, text=long_)]
    sizes = [db.execute("SELECT length(text_digest) + length(CAST(layout AS BLOB)) FROM snapshots WHERE id = ?",
                        [r.id]).fetchone()[0] for r in records]
    assert sizes[0] == sizes[1]
    assert "text" not in db["snapshots"].columns_dict
    assert records[1].holds(long_) and records[1].starts(long_ + "<|im_start|>") and not records[1].starts(long_[:-1])
    assert not records[0].starts("Hello") and records[0].starts("hello there")


def test_eviction_removes_the_files_of_the_parts_it_drops(snaps, save):
    root = save({"recurrent": os.urandom(4000)})
    middle = save({"recurrent": os.urandom(4000)}, parent_id=root.id)
    newest = save({"recurrent": os.urandom(4000)}, parent_id=middle.id)
    assert sorted(snaps.evict(budget_bytes=4000)) == sorted([root.id, middle.id])
    assert sorted(snaps.files.folder.iterdir()) == [snaps.files.path(newest.checksums["recurrent"])]
