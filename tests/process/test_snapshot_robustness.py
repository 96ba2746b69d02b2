"""Damaged, foreign and outdated snapshots are refused with a reason; the answer stays exact."""

import pytest

from model_store.snapshots import SnapshotStore
from model_store.state_files import FILE_PARTS
from tests.helpers.snapshot_chat import USER_MESSAGES, Chat

pytestmark = pytest.mark.process


def latest_snapshot_id(chat):
    leaf = chat.store.current_branch(chat.conversation.id)[-1]
    return chat.store.db.execute("select id from snapshots where message_id = ?", [leaf.id]).fetchone()[0]


def flip_byte(chat, snapshot_id, part):
    """Change one byte of a part, where it is kept: a file beside the database, or chunks in it."""
    snapshots = SnapshotStore(chat.store.db)
    if part in FILE_PARTS:  # (a part the model has none of, such as a transformer's recurrent state: nothing)
        checksum = snapshots.get(snapshot_id).checksums.get(part)
        if checksum is None:
            return
        path = snapshots.files.path(checksum)
        data = bytearray(path.read_bytes())
        data[10] ^= 0xFF
        path.write_bytes(data)
        return
    chat.store.db.execute(
        "update snapshot_parts set data = cast(substr(data, 1, 10) || x'5a' || substr(data, 12) as blob) "
        "where snapshot_id = ? and part = ? and seq = 0", [snapshot_id, part])
    chat.store.db.conn.commit()


def drop_last_chunk_bytes(chat, snapshot_id, part):
    """Cut the last 7 bytes of a part."""
    snapshots = SnapshotStore(chat.store.db)
    if part in FILE_PARTS:
        checksum = snapshots.get(snapshot_id).checksums.get(part)
        if checksum is None:
            return
        path = snapshots.files.path(checksum)
        path.write_bytes(path.read_bytes()[:-7])
        return
    chat.store.db.execute("update snapshot_parts set data = substr(data, 1, length(data) - 7) "
                          "where snapshot_id = ? and part = ?", [snapshot_id, part])
    chat.store.db.conn.commit()


def sql(chat, statement, *args):
    chat.store.db.execute(statement, list(args))
    chat.store.db.conn.commit()


DAMAGE = {
    "corrupt recurrent bytes": lambda chat, sid: flip_byte(chat, sid, "recurrent"),
    "corrupt kv bytes": lambda chat, sid: flip_byte(chat, sid, "kv"),
    "truncated kv chunk": lambda chat, sid: drop_last_chunk_bytes(chat, sid, "kv"),
}
FOREIGN = {
    "another model": lambda chat, sid: sql(chat, "update snapshots set fingerprint = 'someone-else'"),
    "another format version": lambda chat, sid: sql(chat, "update snapshots set format_version = 99 where id = ?", sid),
    "damaged token record": lambda chat, sid: (flip_byte(chat, sid, "recurrent"),
                                               drop_last_chunk_bytes(chat, sid, "decoded_tokens")),
}


def run_with(tmp_path, model, damage, name):
    chat = Chat(tmp_path / name, model)
    chat.start_worker()
    for text in USER_MESSAGES[:2]:
        chat.say(text)
    chat.stop_worker()
    damage(chat, latest_snapshot_id(chat))
    chat.start_worker()
    result = chat.say(USER_MESSAGES[2])
    chat.stop_worker()
    return result.finished


def uninterrupted(tmp_path, model):
    """The third answer of a conversation one worker ran from start to end."""
    chat = Chat(tmp_path / "uninterrupted", model)
    chat.start_worker()
    ids = [chat.say(text).finished.token_ids for text in USER_MESSAGES[:3]]
    chat.stop_worker()
    return ids[-1]


def read_from_scratch(tmp_path, model):
    """The same conversation continued by a worker that has no snapshots at all."""
    chat = Chat(tmp_path / "source", model)
    chat.start_worker()
    for text in USER_MESSAGES[:2]:
        chat.say(text)
    chat.stop_worker()
    chat.store.db.execute("delete from snapshots")
    chat.store.db.conn.commit()
    chat.start_worker()
    finished = chat.say(USER_MESSAGES[2]).finished
    chat.stop_worker()
    assert not finished.snapshot.restored
    return finished.token_ids


@pytest.fixture(scope="module")
def expected_answer(tmp_path_factory):
    """What a damaged run must write, computed once per model and kind for the whole module."""
    computed: dict[tuple, list] = {}

    def expected(kind, model: str) -> list:
        if (kind, model) not in computed:
            computed[kind, model] = kind(tmp_path_factory.mktemp(kind.__name__), model)
        return computed[kind, model]
    return expected


@pytest.fixture(params=["hybrid_tiny", "smollm2"])
def model(request):
    return str(request.getfixturevalue(request.param))


@pytest.mark.parametrize("model_fixture, name", [
    ("hybrid_tiny", "corrupt recurrent bytes"), ("hybrid_tiny", "corrupt kv bytes"), ("hybrid_tiny", "truncated kv chunk"),
    ("smollm2", "corrupt kv bytes"), ("smollm2", "truncated kv chunk"),  # a transformer has no recurrent part
])
def test_damaged_state_is_refused_and_rebuilt_exactly(request, tmp_path, model_fixture, name, expected_answer):
    model = str(request.getfixturevalue(model_fixture))
    finished = run_with(tmp_path, model, DAMAGE[name], name.replace(" ", "-"))
    assert finished.snapshot.restored
    assert any("refused" in note for note in finished.snapshot.notes), finished.snapshot.notes
    assert finished.token_ids == expected_answer(uninterrupted, model)


@pytest.mark.parametrize("name", list(FOREIGN))
def test_unusable_snapshot_falls_back_to_reading_the_conversation(tmp_path, model, name, expected_answer):
    finished = run_with(tmp_path, model, FOREIGN[name], name.replace(" ", "-"))
    assert not finished.snapshot.restored
    assert finished.snapshot.notes and "read again" in finished.snapshot.notes[-1]
    assert finished.token_ids == expected_answer(read_from_scratch, model)
