"""Reading and writing on a busy machine: prefill chunks, cancel inside a chunk, threads.

The chunking no longer follows how long a chunk took (on a busy machine every chunk is slow, and
the old policy fell to 16-token decodes that read several times slower per token); cancel comes
from llama.cpp's abort callback, polled between graph nodes while a chunk is computed; the thread
count follows the cores other programs leave free, which must change nothing but the speed. These
run on the real llama.cpp: the tiny hybrid fixture (recurrent state) and the embedded SmolLM2.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.backends.base import ContextSettings
from engine.backends.llama_context import DecodeAborted
from engine.backends.llama_cpp import LlamaModel
from engine.decoding.generation import Generation, GenerationSettings, prefill
from engine.decoding.progress import PrefillProgress
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import ModelSession, open_session
from engine.decoding.thread_budget import ThreadBudget

TEXT = "The river ran past the mill, and the miller counted sacks of grain by lamplight. "


def open_small_batch(path, n_batch: int) -> ModelSession:
    model = LlamaModel(path)
    return ModelSession(model, ContextSettings(n_ctx=1024, n_batch=n_batch, n_ubatch=n_batch, n_threads=1))


class SlowFirstFeed:
    """The session, but its first feed takes longer than the old policy allowed a chunk (0.8 s)."""

    def __init__(self, session: ModelSession, seconds: float = 1.0) -> None:
        self.session, self.seconds, self.slept = session, seconds, False

    def __getattr__(self, name):
        return getattr(self.session, name)

    def feed(self, tokens, **kwargs) -> None:
        if not self.slept:
            self.slept = True
            time.sleep(self.seconds)
        self.session.feed(tokens, **kwargs)


class CancelAfterPolls:
    """A cancel check that says no for its first ``n`` calls, yes ever after; counts the calls."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.n


def polls_per_decode(session: ModelSession, tokens: list[int]) -> int:
    """How often llama.cpp polls the abort check in one decode (once per graph node)."""
    never = CancelAfterPolls(10**9)
    session.reset()
    session.feed(tokens, abort=never)
    session.reset()
    return never.calls


def no_progress(done: int, total: int) -> None:
    pass


@pytest.fixture(scope="module")
def tiny(hybrid_tiny):
    session = open_small_batch(hybrid_tiny, 32)
    yield session
    session.close()


@pytest.fixture(scope="module")
def smol(smollm2):
    session = open_session(str(smollm2), n_ctx=2048)
    yield session
    session.close()


def test_chunks_are_the_batch_size_however_slow_a_chunk_is(tiny):
    tokens = raw_prompt_tokens(tiny.model, TEXT * 8)[:150]
    slow = SlowFirstFeed(tiny)
    chunks = prefill(slow, tokens, reset=True, on_progress=no_progress, cancelled=lambda: False)
    assert slow.slept and chunks == [32, 32, 32, 32, 22]
    slow_state = tiny.context.state_get()
    assert prefill(tiny, tokens, reset=True, on_progress=no_progress, cancelled=lambda: False) == chunks
    assert tiny.context.state_get() == slow_state, "the same tokens read twice give the same state"


def test_a_cancel_inside_a_chunk_stops_it_and_counts_none_of_it(smol):
    tokens = raw_prompt_tokens(smol.model, TEXT * 40)
    assert len(tokens) > smol.n_batch  # one full chunk, then more
    per_decode = polls_per_decode(smol, tokens[:4])
    assert per_decode > 50  # ggml polls after every node of the graph
    prefix, rest = tokens[:8], tokens[8:]
    smol.reset()
    smol.feed(prefix)
    check = CancelAfterPolls(1)  # the loop's check before the first chunk, then the first poll inside it
    assert prefill(smol, rest, reset=False, on_progress=no_progress, cancelled=check) is None
    assert check.calls == 2, "the chunk stopped at its first poll, not after its hundreds of graph nodes"
    assert smol.tokens == prefix and smol.context.seq_pos_max(0) == len(prefix) - 1
    smol.feed(rest[:100])  # the state is the prefix's exactly: reading on matches a fresh read
    after_abort = smol.last_logits().copy()
    smol.reset()
    smol.feed(prefix)
    smol.feed(rest[:100])
    assert np.array_equal(after_abort, smol.last_logits())


def test_an_aborted_recurrent_state_is_cleared_not_counted(tiny):
    tokens = raw_prompt_tokens(tiny.model, TEXT * 4)
    tiny.reset()
    tiny.feed(tokens[:10])
    with pytest.raises(DecodeAborted):
        tiny.feed(tokens[10:40], abort=CancelAfterPolls(polls_per_decode(tiny, tokens[:4]) // 2))
    # Half the layers may hold their new state: the sequence is cleared, and says so.
    assert tiny.n_past == 0 and tiny.context.seq_pos_max(0) == -1


@pytest.mark.parametrize("name", ["hybrid_tiny", "smollm2"])
def test_after_an_aborted_read_the_next_answers_match_a_fresh_session(request, name):
    path = request.getfixturevalue(name)
    used, fresh = open_session(str(path), n_ctx=2048), open_session(str(path), n_ctx=2048)
    try:
        model = used.model
        history = raw_prompt_tokens(model, "A letter from the harbour master: " + TEXT)
        document = raw_prompt_tokens(model, TEXT * 40)[1:]
        question = raw_prompt_tokens(model, " Who counted the sacks?")[1:]
        used.feed(history)
        saved = used.context.state_get()
        # Abort halfway through the graph of the document's first chunk: some layers have written
        # the chunk into their state and some have not.
        check = CancelAfterPolls(1 + polls_per_decode(used, document[:4]) // 2)
        used.context.state_set(saved)
        used.tokens = list(history)
        assert prefill(used, document, reset=False, on_progress=no_progress, cancelled=check) is None
        assert check.calls > 2 and used.n_past <= len(history)

        # The two ways the engine goes on after a cancelled read: restore a snapshot, or read anew.
        used.reset()
        assert used.context.state_set(saved)
        used.tokens = list(history)
        restored = answer(used, question, reset=False)
        fresh.feed(history)
        assert restored == answer(fresh, question, reset=False)
        assert answer(used, history + question, reset=True) == answer(fresh, history + question, reset=True)
    finally:
        used.close()
        fresh.close()


def answer(session: ModelSession, tokens: list[int], *, reset: bool) -> list[int]:
    run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=24), reset=reset)
    list(run)
    assert len(run.token_ids) >= 8, "the answer must be long enough to be able to differ"
    return run.token_ids


@pytest.mark.parametrize("name", ["hybrid_tiny", "smollm2"])
def test_the_thread_count_changes_no_number(request, name):
    session = open_session(str(request.getfixturevalue(name)), n_ctx=2048)
    try:
        tokens = raw_prompt_tokens(session.model, TEXT * 12)
        results = []
        for threads in (1, 2):
            session.context.thread_budget = lambda: threads
            session.reset()
            session.feed(tokens[:600])
            read = session.last_logits().copy()
            session.feed(tokens[600:601])
            assert session.context.n_threads == threads
            results.append((read, session.last_logits().copy(), session.context.state_get()))
    finally:
        session.close()
    (read1, step1, state1), (read2, step2, state2) = results
    assert np.array_equal(read1, read2) and np.array_equal(step1, step2) and state1 == state2


class FakeMachine:
    """CPU-time counters that move only when told: ``run(seconds, others=cores busy, own=cores busy)``,
    with the budget's watcher noting them every SAMPLE_S of it, as the real one does."""

    def __init__(self) -> None:
        self.now = self.busy = self.own = 0.0
        self.watched: ThreadBudget | None = None

    def run(self, seconds: float, *, others: float, own: float) -> None:
        step = ThreadBudget.SAMPLE_S
        for _ in range(round(seconds / step) if seconds >= step else 0):
            self._advance(step, others, own)
            if self.watched is not None:
                self.watched.note()
        if seconds < step:
            self._advance(seconds, others, own)

    def _advance(self, seconds: float, others: float, own: float) -> None:
        self.now += seconds
        self.busy += seconds * (others + own)
        self.own += seconds * own

    def budget(self, n_max: int = 2) -> ThreadBudget:
        self.watched = ThreadBudget(n_max, clock=lambda: self.now, busy_seconds=lambda: self.busy,
                                    own_seconds=lambda: self.own, n_cores=2, watch=False)
        return self.watched


def test_the_thread_budget_leaves_the_cores_others_keep_busy():
    machine = FakeMachine()
    budget = machine.budget()
    assert budget() == 2  # nothing measured yet: every core
    machine.run(1.0, others=0.67, own=1.33)  # one busy program sharing two cores with two threads
    assert budget() == 1
    machine.run(0.1, others=0.0, own=1.0)
    assert budget() == 1, "the count changes at most every SAMPLE_S"
    machine.run(1.0, others=1.0, own=1.0)  # it keeps its core while we use the other
    assert budget() == 1
    machine.run(1.0, others=0.1, own=1.0)  # it has stopped; a little background remains
    assert budget() == 2
    machine.run(1.0, others=2.0, own=0.0)  # both cores busy: still one thread, never none
    assert budget() == 1


def test_a_program_that_has_stopped_costs_the_next_prompt_nothing():
    """Issue 35: another program kept a core busy for most of a long idle gap, then stopped; half a
    second later the next prompt gets every core (an average over the gap gave it one)."""
    machine = FakeMachine()
    budget = machine.budget()
    machine.run(1.0, others=0.0, own=2.0)
    assert budget() == 2
    machine.run(8.0, others=1.0, own=0.0)  # Hearth idle, someone else busy on one core
    assert budget() == 1
    machine.run(0.5, others=0.0, own=0.0)  # they stop; the machine idles for half a second
    assert budget() == 2


def test_a_budget_asked_before_every_fast_decode_still_decides():
    """A tiny model decodes every fraction of a millisecond from the moment it is opened; being asked
    that often must not push the older notes out before a window's worth exists (it did: the count
    stayed at every core while another program kept one busy)."""
    machine = FakeMachine()
    budget = machine.budget()
    for _ in range(2000):  # a second of decodes, 0.5 ms apart
        machine.run(0.0005, others=1.0, own=1.0)
        budget()
    assert budget() == 1


def test_the_watcher_notes_the_counters_without_being_asked():
    budget = ThreadBudget(2)
    try:
        time.sleep(ThreadBudget.WINDOW_S + 2 * ThreadBudget.SAMPLE_S)
        assert len(budget._samples) >= 3
    finally:
        budget.close()
    notes = len(budget._samples)
    time.sleep(2 * ThreadBudget.SAMPLE_S)
    assert len(budget._samples) == notes, "a closed budget stops watching"


def test_an_asked_thread_count_is_kept(hybrid_tiny):
    asked, chosen = open_session(str(hybrid_tiny), n_ctx=256, n_threads=2), open_session(str(hybrid_tiny), n_ctx=256)
    try:
        assert asked.context.thread_budget is None
        assert isinstance(chosen.context.thread_budget, ThreadBudget)
    finally:
        asked.close()
        chosen.close()


# -- issue 51, point 3: progress inside the first chunk; the load's warm-up leaves no trace ---------
# The first chunk used to report "0 of N" until it finished (no speed to estimate from); the estimate
# now comes from how far llama.cpp is through the chunk's graph (one abort poll per node), which the
# load's warm-up decode has counted.

def test_the_first_chunk_of_a_read_reports_rows_as_it_goes(smol):
    smol.reset()
    smol.warm_up()
    assert smol.n_past == 0 and smol.context.seq_pos_max(0) < 0, "the warm-up leaves nothing in the context"
    tokens = np.random.default_rng(3).integers(100, 10_000, 2 * smol.n_batch).tolist()
    reports: list[tuple[int, int, float, bool]] = []
    progress = PrefillProgress(lambda *r: reports.append(r), heartbeat_s=0.01,
                               within=smol.context.decode_progress)
    try:
        prefill(smol, tokens, reset=True, on_progress=progress.chunk_done, cancelled=lambda: False,
                on_chunk_start=progress.chunk_started)
    finally:
        progress.close()
    first_exact = next(i for i, r in enumerate(reports) if not r[3])
    inside_first = [r[0] for r in reports[:first_exact]]
    assert reports[first_exact][0] == smol.n_batch
    assert len(set(inside_first)) >= 3 and 0 < max(inside_first) < smol.n_batch, reports[:first_exact]
    counts = [r[0] for r in reports]
    assert counts == sorted(counts) and counts[-1] == len(tokens)


def test_a_warmed_up_session_answers_token_for_token_as_a_cold_one(smollm2, smol):
    prompt = raw_prompt_tokens(smol.model, "Once upon a time, in a small village by the sea,")
    settings = GenerationSettings(sampling=GREEDY, max_tokens=24)

    def greedy(session) -> list[int]:
        run = Generation(session, prompt, settings, reset=True)
        for _ in run:
            pass
        return run.token_ids

    cold = open_session(str(smollm2), n_ctx=2048)
    try:
        expected = greedy(cold)
    finally:
        cold.close()
    smol.reset()
    smol.warm_up()
    assert greedy(smol) == expected
