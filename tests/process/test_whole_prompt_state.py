"""Regenerating an answer never stands on a saved state that leaves nothing to read (issue 50, point 4).

Llama 3.2's template trims an answer when it writes it back, so after a turn the worker keeps the
state where the question ended: the whole prompt, cue included. Regenerating that question renders
the very same prompt; standing on that state left no token to read and no logits for the first
answer token ("the prompt is empty"). The worker now stands on an earlier saved state (or reads the
conversation again), so the new answer is the one the first read gave, token for token, at
temperature 0. A real worker process, a real SQLite store, ``llama-real-tiny`` (real template and
vocabulary, random weights).
"""

from __future__ import annotations

import pytest

from app.services.turn import regenerate_turn
from tests.helpers.real_models import REAL_TINY, real_model
from tests.helpers.snapshot_chat import GREEDY, USER_MESSAGES, Chat

pytestmark = pytest.mark.process

FIXED_DAY = 1796299200.0  # Llama's template dates its system prompt: the same day on every run


@pytest.fixture(scope="module")
def llama_tiny():
    return str(real_model(REAL_TINY["llama"]))


def dated_chat(path, model: str) -> Chat:
    chat = Chat(path, model)
    chat.store.db.execute("UPDATE conversations SET created_at = ? WHERE id = ?", [FIXED_DAY, chat.conversation.id])
    chat.conversation = chat.store.get(chat.conversation.id)
    return chat


def regenerate(chat: Chat, user_id: str):
    again = regenerate_turn(chat.store, chat.client, chat.conversation.id, user_id, sampling=GREEDY, max_tokens=24)
    assert not again.errors and again.finished is not None, again.errors
    return again


def test_regenerating_the_first_answer_reads_the_prompt_again_and_writes_the_same(tmp_path, llama_tiny):
    chat = dated_chat(tmp_path, llama_tiny)
    chat.start_worker()
    try:
        first = chat.say(USER_MESSAGES[0])
        again = regenerate(chat, first.user.id)  # the same worker: the question's state is still live
        chat.stop_worker()
        chat.start_worker()  # a new worker: that state is only on disk
        third = regenerate(chat, first.user.id)
    finally:
        chat.stop_worker()
    assert len(first.finished.token_ids) > 3
    assert again.finished.token_ids == first.finished.token_ids
    assert third.finished.token_ids == first.finished.token_ids
    assert again.answer.content == third.answer.content == first.answer.content
    assert again.finished.snapshot.prefilled_tokens == first.finished.snapshot.prefilled_tokens
    answers = [m.id for m in chat.store.children(first.user.id)]
    assert answers == [first.answer.id, again.answer.id, third.answer.id]


def test_regenerating_a_later_answer_stands_on_the_turn_before(tmp_path, llama_tiny):
    chat = dated_chat(tmp_path, llama_tiny)
    chat.start_worker()
    try:
        chat.say(USER_MESSAGES[0])
        second = chat.say(USER_MESSAGES[1])
        again = regenerate(chat, second.user.id)
        chat.stop_worker()
        chat.start_worker()
        third = regenerate(chat, second.user.id)
        after = chat.say(USER_MESSAGES[2])  # the conversation goes on from the regenerated answer
    finally:
        chat.stop_worker()
    assert again.finished.token_ids == third.finished.token_ids == second.finished.token_ids
    for report in (again.finished.snapshot, third.finished.snapshot):
        assert report.restored  # the first question's state, as the first answer to this one stood on
        assert report.prefilled_tokens == second.finished.snapshot.prefilled_tokens
    assert after.finished.snapshot.restored

    fresh = dated_chat(tmp_path / "fresh", llama_tiny)  # the same two questions, answered once each
    fresh.start_worker()
    try:
        fresh.say(USER_MESSAGES[0])
        expected = fresh.say(USER_MESSAGES[1]).finished.token_ids
    finally:
        fresh.stop_worker()
    assert again.finished.token_ids == expected
