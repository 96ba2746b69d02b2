"""Every later turn stands on saved state under each catalogue family's real chat template, and the
state holds exactly what the template writes (issue 30).

Real tokenizers and templates from llama.cpp (tests/fixtures/real_families.py), tiny random weights,
a real worker process, a real SQLite store. Qwen3.5's template opens answers with ``<think>`` and
writes earlier answers without their reasoning; Llama 3.2's writes a date into its system prompt;
Granite's adds a default system prompt; LFM2.5's is plain ChatML with reasoning stripped.
"""

from __future__ import annotations

import pytest

from app.services.turn import open_conversation
from model_store.snapshots import SnapshotStore
from tests.helpers.real_models import REAL_TINY, real_model
from tests.helpers.snapshot_chat import Chat
from tests.helpers.template_turns import QUESTIONS, TemplateOracle, chain_tokens, held_text

FIXED_DAY = 1796299200.0  # 2026-12-03 12:00 UTC


@pytest.fixture(params=sorted(REAL_TINY), scope="module")
def family_model(request):
    return real_model(REAL_TINY[request.param])


def test_every_later_turn_reads_only_the_last_answer_the_new_message_and_the_framing(family_model, hearth_home):
    """Two turns, then a new worker process (as after a restart) opens the conversation and answers a third."""
    chat = Chat(hearth_home, str(family_model))
    # A fixed day, so Llama's dated prompt (and so the random model's answers) is the same on every run. On this
    # day its second answer samples two pieces where the tokenizer spells that text otherwise (CI, 2026-12-03).
    chat.store.db.execute("UPDATE conversations SET created_at = ? WHERE id = ?", [FIXED_DAY, chat.conversation.id])
    chat.conversation = chat.store.get(chat.conversation.id)
    oracle = TemplateOracle(family_model, chat.conversation.created_at)
    reports = []
    try:
        chat.start_worker()
        for question in QUESTIONS[:2]:
            reports.append(chat.say(question, max_tokens=12).finished.snapshot)
        chat.stop_worker()
        chat.start_worker()
        opened = open_conversation(chat.store, chat.client, chat.conversation.id)
        reports.append(chat.say(QUESTIONS[2], max_tokens=12).finished.snapshot)
    finally:
        if chat.client is not None:
            chat.stop_worker()
    assert opened.restored, opened.notes
    branch = chat.store.current_branch(chat.conversation.id)
    questions = [i for i, m in enumerate(branch) if m.role == "user"]
    for turn, (report, question) in enumerate(zip(reports[1:], questions[1:]), start=2):
        most = oracle.most_read(branch[:question + 1])
        assert report.restored, (turn, report.notes)
        assert report.prefilled_tokens <= most, (turn, report.prefilled_tokens, most)
    # Nothing the template would not write stays in the state: every saved state's tokens spell its text, and
    # a question's saved state is the template's own rendering of the conversation up to it and of the framing
    # it writes before an answer in history, token for token but where an answer's own tokens spell the same
    # bytes otherwise.
    snapshots = SnapshotStore(chat.store.db)
    final_text = oracle.text(branch, answer=False)
    for depth, message in enumerate(branch, start=1):
        for record in snapshots.for_message(message.id):
            tokens = chain_tokens(snapshots, record)
            assert record.holds(oracle.detokenize(tokens))
            if message.role == "user":
                assert not oracle.differences(tokens, oracle.question_tokens(branch[:depth]))
                assert record.starts(final_text)
    oracle.close()


def test_a_date_the_template_writes_is_the_conversations_so_its_state_serves_on_a_later_day(hearth_home):
    """Llama 3.2's template writes "Today Date" into its system prompt: a conversation started three
    days ago renders that day's date on every turn, so today's turn still stands on its saved state."""
    import time

    model = real_model(REAL_TINY["llama"])
    chat = Chat(hearth_home, str(model))
    started = time.time() - 3 * 86400
    chat.store.db.execute("UPDATE conversations SET created_at = ? WHERE id = ?", [started, chat.conversation.id])
    chat.start_worker()
    try:
        chat.say(QUESTIONS[0], max_tokens=8)
        second = chat.say(QUESTIONS[1], max_tokens=8).finished.snapshot
    finally:
        chat.stop_worker()
    assert second.restored, second.notes
    first_answer = chat.store.current_branch(chat.conversation.id)[1]
    saved = SnapshotStore(chat.store.db).for_message(first_answer.id) or SnapshotStore(chat.store.db).for_message(
        chat.store.current_branch(chat.conversation.id)[0].id)
    held = held_text(model, SnapshotStore(chat.store.db), saved[0])
    assert time.strftime("%d %b %Y", time.localtime(started)) in held
    assert time.strftime("%d %b %Y") not in held


def test_a_template_that_writes_its_whole_cue_again_reads_every_prompt_in_one_part(hybrid_tiny, hearth_home):
    """A question's state is kept after as much of the answer's cue as the template writes again before
    that answer once it is history, and only the rest is read apart. Plain ChatML writes
    ``<|im_start|>assistant\n`` both times, so no turn reads its prompt in two parts: not the first,
    before the template is known to write the answer back, nor any later one."""
    chat = Chat(hearth_home, str(hybrid_tiny))
    try:
        chat.start_worker()
        reports = [chat.say(question, max_tokens=8).finished.snapshot for question in QUESTIONS]
    finally:
        if chat.client is not None:
            chat.stop_worker()
    snapshots = SnapshotStore(chat.store.db)
    chunks = [snapshots.get(report.snapshot_id).layout["prefill_chunks"] for report in reports]
    assert [len(c) for c in chunks] == [1, 1, 1], chunks
    assert all(report.restored for report in reports[1:])


def test_under_qwen35_a_question_state_keeps_the_answers_opening_and_only_think_is_read_apart(hearth_home):
    """Qwen3.5 cues ``<|im_start|>assistant\n<think>\n`` and writes an earlier answer after
    ``<|im_start|>assistant\n``: its question snapshot ends there, and each turn reads the two tokens
    of ``<think>\n`` apart (not the cue's five)."""
    model = real_model(REAL_TINY["qwen35"])
    chat = Chat(hearth_home, str(model))
    try:
        chat.start_worker()
        reports = [chat.say(question, max_tokens=8).finished.snapshot for question in QUESTIONS[:2]]
    finally:
        chat.stop_worker()
    snapshots = SnapshotStore(chat.store.db)
    branch = chat.store.current_branch(chat.conversation.id)
    for report, question in zip(reports, [m for m in branch if m.role == "user"]):
        saved = snapshots.for_message(question.id)
        assert len(saved) == 1, "the answer is written without its reasoning: the question's state is kept"
        assert held_text(model, snapshots, saved[0]).endswith("<|im_start|>assistant\n")
        question_read = sum(saved[0].layout["prefill_chunks"])
        assert report.prefilled_tokens - question_read == 2, (report.prefilled_tokens, question_read)
    assert reports[1].restored, reports[1].notes


def test_a_turn_on_the_question_state_kept_in_memory_answers_as_one_restored_from_its_snapshot(tmp_path):
    """Under Qwen3.5's template each turn stands on the last question's snapshot. While the worker's
    live sequence still holds it, it is taken back in memory (its recurrent part copied, the KV after
    it dropped); after a restart it is read from its files. Both answer the next messages alike."""
    model = real_model(REAL_TINY["qwen35"])

    def answers(home, restart_before: int | None) -> list[list[int]]:
        chat = Chat(home, str(model))
        chat.start_worker()
        got = []
        try:
            for turn, question in enumerate(QUESTIONS):
                if turn == restart_before:
                    chat.stop_worker()
                    chat.start_worker()
                result = chat.say(question, max_tokens=12).finished
                assert turn == 0 or result.snapshot.restored, result.snapshot.notes
                got.append(result.token_ids)
        finally:
            chat.stop_worker()
        return got

    in_memory, restored = answers(tmp_path / "in-memory", None), answers(tmp_path / "restarted", 1)
    assert in_memory == restored
    assert all(len(ids) > 3 for ids in in_memory[1:])
