"""A conversation's system prompt through a real worker: sent first, and a change applies from the next
message at the cost of one reading of the conversation, after which turns stand on saved state again.

The conversation's rendering starts with the system prompt, so after a change no saved state is a
prefix of the new rendering (engine.state.snapshot_cursor): the first turn after it must read the conversation again,
and write exactly what a fresh worker writes for the same messages under the new prompt, token for
token (greedy). Its end is saved, so the turn after that stands on it.
"""

from __future__ import annotations

import pytest

from engine import protocol as p
from model_store.conversations import ConversationStore, Message
from model_store.snapshots import SnapshotStore
from tests.helpers.real_models import REAL_TINY, real_model
from tests.helpers.snapshot_chat import USER_MESSAGES, Chat
from tests.helpers.template_turns import held_text

pytestmark = pytest.mark.process

PIRATE = "You are a pirate. Answer every question the way a pirate would, in one sentence."


def copy_branch(store: ConversationStore, branch: list[Message], *, system_prompt: str) -> str:
    """A new conversation holding ``branch``'s messages as they were written, with ``system_prompt``."""
    conversation = store.create("copy", system_prompt=system_prompt)
    parent = None
    for message in branch:
        parent = store.add_message(conversation.id, message.role, message.content, parent_id=parent,
                                   reasoning=message.reasoning).id
    return conversation.id


def test_a_changed_system_prompt_is_read_once_answers_as_a_fresh_run_and_later_turns_reuse(tmp_path, smollm2):
    chat = Chat(tmp_path / "changed", str(smollm2))
    chat.start_worker()
    try:
        chat.say(USER_MESSAGES[0])
        assert chat.say(USER_MESSAGES[1]).finished.snapshot.restored, "turns stand on saved state before the change"
        before = chat.store.current_branch(chat.conversation.id)
        chat.store.set_system_prompt(chat.conversation.id, PIRATE)
        changed = chat.say(USER_MESSAGES[2])
        after = chat.say(USER_MESSAGES[3])
    finally:
        chat.stop_worker()
    assert changed.command.messages[0] == p.WireMessage("system", PIRATE)
    assert [m.role for m in changed.command.messages[1:]] == ["user", "assistant"] * 2 + ["user"]
    read = changed.finished.snapshot
    assert not read.restored and read.prefilled_tokens > 60, "no saved state stands under the new first message"
    reused = after.finished.snapshot
    assert reused.restored and reused.notes == []
    assert reused.restored_tokens > read.prefilled_tokens and reused.prefilled_tokens < 40

    fresh = Chat(tmp_path / "fresh", str(smollm2))
    with_prompt = copy_branch(fresh.store, before, system_prompt=PIRATE)
    without = copy_branch(fresh.store, before, system_prompt="")
    fresh.start_worker()
    try:
        fresh.conversation = fresh.store.get(with_prompt)
        expected = fresh.say(USER_MESSAGES[2])
        fresh.conversation = fresh.store.get(without)
        old_prompt = fresh.say(USER_MESSAGES[2])
    finally:
        fresh.stop_worker()
    assert not expected.finished.snapshot.restored
    assert changed.finished.token_ids == expected.finished.token_ids
    assert changed.finished.token_ids != old_prompt.finished.token_ids, "the prompt reaches the model"


@pytest.fixture(params=sorted(REAL_TINY), scope="module")
def family_model(request):
    return real_model(REAL_TINY[request.param])


def test_each_real_template_writes_the_system_prompt_first_and_later_turns_reuse(family_model, hearth_home):
    """Qwen3.5's template refuses a system message anywhere but first; Llama 3.2's and Granite's put
    theirs in place of their default one; LFM2.5's writes it as ChatML."""
    chat = Chat(hearth_home, str(family_model))
    chat.conversation = chat.store.create("pirate", model=str(family_model), system_prompt=PIRATE)
    chat.start_worker()
    try:
        first = chat.say(USER_MESSAGES[0], max_tokens=8)
        second = chat.say(USER_MESSAGES[1], max_tokens=8)
    finally:
        chat.stop_worker()
    assert not first.errors and second.finished.snapshot.restored, second.finished.snapshot.notes
    snapshots = SnapshotStore(chat.store.db)
    record = (snapshots.for_message(first.user.id) or snapshots.for_message(first.answer.id))[0]  # the first turn's
    held = held_text(family_model, snapshots, record)
    assert PIRATE in held and held.index(PIRATE) < held.index(USER_MESSAGES[0])
