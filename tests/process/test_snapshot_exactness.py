"""Continuing from a snapshot in a new worker process writes exactly what an uninterrupted run writes."""

import pytest

from app.turn import send_turn
from engine import protocol as p
from engine.process_client import ProcessClient
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database

pytestmark = pytest.mark.process

USER_MESSAGES = ["Hello! Who are you?", "Tell me about rivers.", "Why is the sky blue?",
                 "Name three fruits.", "Thanks, and goodbye."]
GREEDY = p.SamplingSpec(temperature=0)


class Chat:
    """A conversation in its own data folder, driven through a real worker process."""

    def __init__(self, data_dir, model: str):
        self.data_dir, self.model = data_dir, model
        self.store = ConversationStore(open_database(database_path(data_dir)))
        self.conversation = self.store.create("test", model=model)
        self.client = None

    def start_worker(self):
        self.client = ProcessClient(data_dir=self.data_dir)
        self.client.start()
        self.client.load_model(self.model)

    def stop_worker(self):
        self.client.close()
        self.client = None

    def say(self, text, reply_to=None, max_tokens=24):
        result = send_turn(self.store, self.client, self.conversation.id, text, reply_to=reply_to,
                           sampling=GREEDY, max_tokens=max_tokens)
        assert not result.errors and result.finished is not None, result.errors
        return result


@pytest.fixture(params=["hybrid_tiny", "smollm2"])
def model(request):
    return str(request.getfixturevalue(request.param))


@pytest.mark.parametrize("turns_before_restart", [1, 3])
def test_new_worker_continues_token_identically(tmp_path, model, turns_before_restart):
    reference = Chat(tmp_path / "uninterrupted", model)
    reference.start_worker()
    expected = [reference.say(text).finished.token_ids for text in USER_MESSAGES[: turns_before_restart + 2]]
    reference.stop_worker()

    chat = Chat(tmp_path / "restarted", model)
    chat.start_worker()
    for text in USER_MESSAGES[:turns_before_restart]:
        chat.say(text)
    chat.stop_worker()
    chat.start_worker()  # a new process: nothing of the conversation is in memory
    got = []
    for i, text in enumerate(USER_MESSAGES[turns_before_restart: turns_before_restart + 2]):
        result = chat.say(text)
        got.append(result.finished.token_ids)
        report = result.finished.snapshot
        assert report.restored and report.notes == []
        if i == 0:
            assert report.restored_tokens > 0 and report.prefilled_tokens < report.restored_tokens + 40
    chat.stop_worker()
    assert got == expected[turns_before_restart:]
    assert any(len(ids) > 3 for ids in got)


def test_edit_at_an_earlier_turn_restores_that_turn(tmp_path, model):
    reference = Chat(tmp_path / "uninterrupted", model)
    reference.start_worker()
    reference.say(USER_MESSAGES[0])
    expected = reference.say("An edited second question about mountains.").finished.token_ids
    reference.stop_worker()

    chat = Chat(tmp_path / "edited", model)
    chat.start_worker()
    first = chat.say(USER_MESSAGES[0])
    for text in USER_MESSAGES[1:4]:
        chat.say(text)
    chat.stop_worker()
    chat.start_worker()
    edited = chat.say("An edited second question about mountains.", reply_to=first.answer.id)
    chat.stop_worker()
    assert edited.finished.snapshot.restored
    assert edited.finished.token_ids == expected
    branch = chat.store.current_branch(chat.conversation.id)
    assert [m.role for m in branch] == ["user", "assistant", "user", "assistant"]
    assert len(chat.store.children(first.answer.id)) == 2  # the old branch is still there
