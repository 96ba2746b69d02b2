"""Continuing from a snapshot in a new worker process writes exactly what an uninterrupted run writes."""

import pytest

from app.services.turn import open_conversation
from tests.helpers.snapshot_chat import GREEDY, USER_MESSAGES, Chat

pytestmark = pytest.mark.process


@pytest.fixture(params=["hybrid_tiny", "smollm2"])
def model(request):
    return str(request.getfixturevalue(request.param))


@pytest.fixture(scope="module")
def uninterrupted_answers(tmp_path_factory):
    """Each model's greedy answers to all of USER_MESSAGES in one worker, computed once per module."""
    answers: dict[str, list] = {}

    def answers_for(model: str) -> list:
        if model not in answers:
            reference = Chat(tmp_path_factory.mktemp("uninterrupted"), model)
            reference.start_worker()
            answers[model] = [reference.say(text).finished.token_ids for text in USER_MESSAGES]
            reference.stop_worker()
        return answers[model]
    return answers_for


# Restarting after 1 turn (restored on send) and after 3 (restored on open) covers both
# dimensions; the other two corners repeat the same code paths at twice the cost.
@pytest.mark.parametrize(("turns_before_restart", "open_first"), [(1, False), (3, True)],
                         ids=["restore-on-send-after-1", "restore-on-open-after-3"])
def test_new_worker_continues_token_identically(tmp_path, model, turns_before_restart, open_first,
                                                uninterrupted_answers):
    expected = uninterrupted_answers(model)[: turns_before_restart + 2]

    chat = Chat(tmp_path / "restarted", model)
    chat.start_worker()
    for text in USER_MESSAGES[:turns_before_restart]:
        chat.say(text)
    chat.stop_worker()
    chat.start_worker()  # a new process: nothing of the conversation is in memory
    if open_first:
        opened = open_conversation(chat.store, chat.client, chat.conversation.id)
        assert opened.restored and opened.restored_tokens > 0 and opened.notes == []
    got = []
    for i, text in enumerate(USER_MESSAGES[turns_before_restart: turns_before_restart + 2]):
        result = chat.say(text)
        got.append(result.finished.token_ids)
        report = result.finished.snapshot
        assert report.restored and report.notes == []
        if i == 0:
            assert report.restored_tokens > 0 and report.prefilled_tokens < report.restored_tokens + 40
            if open_first:
                assert report.prefilled_tokens < 40  # only the new message: the state was already there
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


def test_regenerate_restores_the_turn_before_and_keeps_both_answers(tmp_path, hybrid_tiny):
    from app.services.turn import regenerate_turn

    chat = Chat(tmp_path, str(hybrid_tiny))
    chat.start_worker()
    chat.say(USER_MESSAGES[0])
    second = chat.say(USER_MESSAGES[1])
    chat.stop_worker()
    chat.start_worker()
    again = regenerate_turn(chat.store, chat.client, chat.conversation.id, second.user.id,
                            sampling=GREEDY, max_tokens=24)
    chat.stop_worker()
    assert again.finished.snapshot.restored
    assert again.finished.token_ids == second.finished.token_ids  # greedy: the same answer again
    assert [m.id for m in chat.store.children(second.user.id)] == [second.answer.id, again.answer.id]


def test_small_disk_budget_evicts_inner_recurrent_parts_and_edits_stay_exact(tmp_path, hybrid_tiny):
    reference = Chat(tmp_path / "reference", str(hybrid_tiny))
    reference.start_worker()
    for text in USER_MESSAGES[:2]:
        reference.say(text)
    expected = reference.say("Edited third question.").finished.token_ids
    reference.stop_worker()

    chat = Chat(tmp_path / "tight", str(hybrid_tiny))
    chat.start_worker(snapshot_budget_bytes=60_000)  # room for about two turns
    turns = [chat.say(text) for text in USER_MESSAGES]
    chat.stop_worker()
    records = [chat.store.db.execute("select part_bytes from snapshots where message_id = ?",
                                     [t.answer.id]).fetchone()[0] for t in turns]
    assert '"recurrent"' not in records[1] and '"recurrent"' in records[-1]  # inner evicted, newest kept
    chat.start_worker()
    edited = chat.say("Edited third question.", reply_to=turns[1].answer.id)
    chat.stop_worker()
    assert any("evicted" in note for note in edited.finished.snapshot.notes)
    assert edited.finished.token_ids == expected
