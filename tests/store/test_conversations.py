"""Conversations and their message trees."""

from __future__ import annotations

import pytest

from model_store.conversations import ConversationStore
from model_store.db import StoreError
from model_store.snapshots import SnapshotStore


def count(db, table, where="1", params=()):
    return db.execute(f"SELECT count(*) FROM {table} WHERE {where}", list(params)).fetchone()[0]


def test_create_and_get_round_trip(convs):
    conv = convs.create("Trip", model="qwen", settings={"temperature": 0.2, "top_k": [1, 2]})
    got = convs.get(conv.id)
    assert got == conv
    assert got.settings == {"temperature": 0.2, "top_k": [1, 2]}
    assert got.leaf_id is None and got.created_at == got.updated_at
    assert len(conv.id) == 32 and convs.create("x").model == "default"


def test_list_is_newest_updated_first(convs):
    a, b, c = convs.create("a"), convs.create("b"), convs.create("c")
    assert [x.id for x in convs.list()] == [c.id, b.id, a.id]
    convs.add_message(a.id, "user", "hi", parent_id=None)
    assert [x.id for x in convs.list()] == [a.id, c.id, b.id]
    convs.rename(b.id, "bee")
    assert [x.id for x in convs.list()] == [b.id, a.id, c.id]


def test_search_by_title_and_content(convs):
    soup = convs.create("Soup recipes")
    trains = convs.create("Travel")
    convs.add_message(trains.id, "user", "Which TRAIN goes to Lyon?", parent_id=None)
    percent = convs.create("Discount 50% off")
    assert [c.id for c in convs.list("sOUp")] == [soup.id]
    assert [c.id for c in convs.list("train")] == [trains.id]
    assert [c.id for c in convs.list("o")] == [percent.id, trains.id, soup.id]
    assert convs.list("nothing like this") == []
    assert [c.id for c in convs.list("%")] == [percent.id]  # wildcards are literal
    assert convs.list("_") == []


def test_rename(convs):
    conv = convs.create("old")
    convs.rename(conv.id, "new")
    assert convs.get(conv.id).title == "new"
    with pytest.raises(StoreError, match="no conversation missing"):
        convs.rename("missing", "x")


def test_delete_cascades_to_messages_snapshots_and_parts(db, convs):
    snaps = SnapshotStore(db)
    keep, gone = convs.create("keep"), convs.create("gone")
    for conv in (keep, gone):
        user = convs.add_message(conv.id, "user", "q", parent_id=None)
        answer = convs.add_message(conv.id, "assistant", "a", parent_id=user.id)
        first = snaps.save(
            conversation_id=conv.id, message_id=user.id, identity=user.identity, parent_id=None, fingerprint="f",
            format_version=1, n_tokens=3, kv_start=0, text="q", layout={},
            parts={"recurrent": conv.id.encode() * 100_000, "kv": b"k" * 10, "prefill_tokens": b"\x01" * 8},
        )
        snaps.save(
            conversation_id=conv.id, message_id=answer.id, identity=answer.identity, parent_id=first.id, fingerprint="f",
            format_version=1, n_tokens=5, kv_start=0, text="qa", layout={},
            parts={"recurrent": b"R" * 100, "decoded_tokens": b"\x02" * 8},
        )
    files = snaps.files.folder
    assert count(db, "snapshot_parts") == 2 * 2  # the token records; the states are files
    assert len(list(files.iterdir())) == 2 + 2  # each conversation's own recurrent state, and two shared ones

    convs.delete(gone.id)

    with pytest.raises(StoreError):
        convs.get(gone.id)
    assert count(db, "messages", "conversation_id = ?", [gone.id]) == 0
    assert count(db, "snapshots", "conversation_id = ?", [gone.id]) == 0
    assert count(db, "snapshot_parts") == 2  # only keep's parts are left
    assert count(db, "messages") == 2 and count(db, "snapshots") == 2
    assert sorted(f.name for f in files.iterdir()) == sorted(snaps.named_files()) and len(snaps.named_files()) == 3
    assert [c.id for c in convs.list()] == [keep.id]
    with pytest.raises(StoreError, match="no conversation"):
        convs.delete(gone.id)


def test_regenerate_makes_two_assistant_children(convs):
    conv = convs.create("t")
    user = convs.add_message(conv.id, "user", "hi", parent_id=None)
    first = convs.add_message(conv.id, "assistant", "hello", parent_id=user.id)
    second = convs.add_message(conv.id, "assistant", "hey there", parent_id=user.id)
    assert convs.children(user.id) == [first, second]
    assert convs.get(conv.id).leaf_id == second.id
    assert convs.current_branch(conv.id) == [user, second]

    convs.set_leaf(conv.id, first.id)
    assert convs.current_branch(conv.id) == [user, first]


def test_edit_makes_a_second_user_child_of_the_same_parent(convs):
    conv = convs.create("t")
    u1 = convs.add_message(conv.id, "user", "one", parent_id=None)
    a1 = convs.add_message(conv.id, "assistant", "1", parent_id=u1.id)
    u2 = convs.add_message(conv.id, "user", "two", parent_id=a1.id)
    a2 = convs.add_message(conv.id, "assistant", "2", parent_id=u2.id)
    edited = convs.add_message(conv.id, "user", "two, edited", parent_id=a1.id)
    a3 = convs.add_message(conv.id, "assistant", "2'", parent_id=edited.id)

    assert [m.content for m in convs.children(a1.id)] == ["two", "two, edited"]
    assert convs.current_branch(conv.id) == [u1, a1, edited, a3]
    assert convs.branch(a2.id) == [u1, a1, u2, a2]
    assert convs.branch(u1.id) == [u1]
    assert convs.children(a3.id) == []


def test_current_branch_of_empty_conversation(convs):
    assert convs.current_branch(convs.create("empty").id) == []


def test_add_message_bumps_updated_at_and_keeps_fields(convs):
    conv = convs.create("t")
    msg = convs.add_message(
        conv.id, "assistant", "", parent_id=None, status="generating",
        stats={"gen_n": 3}, message_id="m-1",
    )
    assert msg.id == "m-1"
    assert convs.message("m-1") == msg
    assert convs.get(conv.id).updated_at == msg.created_at > conv.updated_at


def test_update_message(convs):
    conv = convs.create("t")
    msg = convs.add_message(conv.id, "assistant", "", parent_id=None, status="generating")
    partial = convs.update_message(msg.id, content="Hel")
    assert (partial.content, partial.status, partial.stats) == ("Hel", "generating", {})
    done = convs.update_message(msg.id, content="Hello", status="done", stats={"gen_n": 2})
    assert convs.message(msg.id) == done
    assert (done.content, done.status, done.stats) == ("Hello", "done", {"gen_n": 2})
    assert convs.update_message(msg.id) == done
    with pytest.raises(ValueError, match="status"):
        convs.update_message(msg.id, status="finished")
    with pytest.raises(StoreError, match="no message nope"):
        convs.update_message("nope", content="x")


def test_unknown_ids_raise_helpful_store_errors(convs):
    with pytest.raises(StoreError) as err:
        convs.get("abc123")
    assert "no conversation abc123" in str(err.value)
    assert "`hearth conversations`" in str(err.value)
    with pytest.raises(StoreError, match="no conversation abc123"):
        convs.add_message("abc123", "user", "x", parent_id=None)
    with pytest.raises(StoreError, match="no message"):
        convs.message("zzz")
    with pytest.raises(StoreError, match="no message"):
        convs.branch("zzz")
    with pytest.raises(StoreError, match="no conversation"):
        convs.current_branch("abc123")


def test_messages_cannot_cross_conversations(db, convs):
    a, b = convs.create("a"), convs.create("b")
    in_a = convs.add_message(a.id, "user", "x", parent_id=None)
    with pytest.raises(StoreError, match="not in conversation"):
        convs.add_message(b.id, "assistant", "y", parent_id=in_a.id)
    with pytest.raises(StoreError, match="not in conversation"):
        convs.set_leaf(b.id, in_a.id)
    with pytest.raises(StoreError, match="no message"):
        convs.add_message(a.id, "assistant", "y", parent_id="ghost")
    assert count(db, "messages") == 1  # failed adds left nothing behind
    assert convs.get(b.id).leaf_id is None


def test_store_is_shared_through_the_file(db_path, convs):
    from model_store.db import open_database

    conv = convs.create("seen elsewhere")
    convs.add_message(conv.id, "user", "hi", parent_id=None)
    other = open_database(db_path)
    try:
        assert [m.content for m in ConversationStore(other).current_branch(conv.id)] == ["hi"]
    finally:
        other.close()


def test_siblings_list_every_version_at_a_fork_including_first_messages(convs):
    conv = convs.create("t")
    first = convs.add_message(conv.id, "user", "v1", parent_id=None)
    edited = convs.add_message(conv.id, "user", "v2", parent_id=None)
    answer = convs.add_message(conv.id, "assistant", "a", parent_id=first.id)
    other = convs.create("other")
    convs.add_message(other.id, "user", "elsewhere", parent_id=None)
    assert [m.id for m in convs.siblings(first.id)] == [first.id, edited.id]
    assert [m.id for m in convs.siblings(answer.id)] == [answer.id]
    versions = convs.versions(conv.id)  # every fork at once, the same lists
    assert all(versions[m.parent_id] == [s.id for s in convs.siblings(m.id)] for m in (first, edited, answer))
    assert set(versions) == {None, first.id}


def test_newest_leaf_follows_the_newest_child_down(convs):
    conv = convs.create("t")
    user = convs.add_message(conv.id, "user", "q", parent_id=None)
    old = convs.add_message(conv.id, "assistant", "old", parent_id=user.id)
    new = convs.add_message(conv.id, "assistant", "new", parent_id=user.id)
    follow_up = convs.add_message(conv.id, "user", "more", parent_id=old.id)
    assert convs.newest_leaf(user.id) == new.id
    assert convs.newest_leaf(old.id) == follow_up.id
    assert convs.newest_leaf(new.id) == new.id
    with pytest.raises(StoreError):
        convs.newest_leaf("nope")


def test_unfinished_answers_are_marked_interrupted(convs):
    conv = convs.create("t")
    user = convs.add_message(conv.id, "user", "q", parent_id=None)
    stale = convs.add_message(conv.id, "assistant", "half an ans", parent_id=user.id, status="generating")
    assert convs.mark_unfinished_interrupted() == 1
    assert convs.message(stale.id).status == "interrupted"
    assert convs.message(stale.id).content == "half an ans"
    assert convs.message(user.id).status == "done"
