"""Prompt-lookup drafting: what it proposes, checked against a brute-force scan, and that it indexes
incrementally."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.speculative.prompt_lookup import PromptLookup


def scan(history, k, max_ngram=4, min_ngram=2):
    """The definition by brute force: the longest suffix n-gram's latest earlier occurrence."""
    end = len(history)
    for n in range(min(max_ngram, end - 1), min_ngram - 1, -1):
        suffix = history[end - n:]
        for start in range(end - n - 1, -1, -1):  # an occurrence that has a token after it
            if history[start:start + n] == suffix:
                return history[start + n:min(start + n + k, end)]
    return []


def test_proposes_the_continuation_of_a_repeated_phrase():
    # "the cat sat on the mat . the cat" -> "sat on the mat"
    history = [1, 2, 3, 4, 1, 5, 6, 1, 2]
    draft = PromptLookup().propose(history, 4)
    assert draft.tokens == [3, 4, 1, 5]
    assert draft.q == [None] * 4


def test_kind_and_point_mass_drafts():
    lookup = PromptLookup()
    assert lookup.kind == "lookup"
    assert lookup.propose([7, 8, 9, 7, 8], 3).q == [None, None, None]


def test_prefers_the_longest_ngram_over_a_more_recent_shorter_one():
    # Suffix [1, 2, 3]: its 3-gram occurs at the start (followed by 10); the 2-gram [2, 3] occurs
    # more recently (followed by 20). The longer match wins.
    history = [1, 2, 3, 10, 0, 2, 3, 20, 0, 1, 2, 3]
    assert PromptLookup().propose(history, 1).tokens == [10]
    assert PromptLookup(max_ngram=2).propose(history, 1).tokens == [20]


def test_prefers_the_most_recent_occurrence():
    history = [5, 6, 1, 0, 5, 6, 2, 0, 5, 6, 3, 0, 5, 6]
    assert PromptLookup().propose(history, 2).tokens == [3, 0]


def test_proposes_nothing_without_a_match():
    lookup = PromptLookup()
    assert lookup.propose([1, 2, 3, 4, 5, 6], 4).tokens == []
    assert lookup.propose([], 4).tokens == []
    assert lookup.propose([1], 4).tokens == []
    # A single repeated token is a 1-gram match, used only when min_ngram is 1.
    assert PromptLookup().propose([9, 1, 2, 9], 2).tokens == []
    assert PromptLookup(min_ngram=1).propose([9, 1, 2, 9], 2).tokens == [1, 2]


def test_respects_k_and_stops_at_the_end_of_history():
    history = [1, 2, 3, 4, 5, 6, 1, 2]
    assert PromptLookup().propose(history, 2).tokens == [3, 4]
    assert PromptLookup().propose(history, 0).tokens == []
    assert PromptLookup().propose(history, 100).tokens == [3, 4, 5, 6, 1, 2]
    # The suffix itself never matches; the latest earlier occurrence ends one token before it.
    assert PromptLookup().propose([4, 4, 4, 4, 4], 3).tokens == [4]


def test_rejects_bad_ngram_bounds():
    with pytest.raises(ValueError):
        PromptLookup(max_ngram=2, min_ngram=3)
    with pytest.raises(ValueError):
        PromptLookup(min_ngram=0)


def _mutations(draw_ops, vocab):
    """Histories as a decode loop sees them: mostly growing, sometimes cut back or rewritten."""
    history: list[int] = []
    for op, size, seed in draw_ops:
        r = random.Random(seed)
        if op == "grow":
            history = history + [r.randrange(vocab) for _ in range(size)]
        elif op == "truncate":
            history = history[:max(0, len(history) - size)]
        elif op == "rewrite_tail":  # same length, new tail (within the tokens the index checks)
            cut = min(size, len(history), PromptLookup.check_tokens)
            history = history[:len(history) - cut] + [r.randrange(vocab) for _ in range(cut)]
        else:  # "restart": a new conversation
            history = [r.randrange(vocab) for _ in range(size)]
        yield history


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["grow", "grow", "grow", "truncate", "rewrite_tail", "restart"]),
                  st.integers(0, 12), st.integers(0, 2**32)),
        min_size=1, max_size=25),
    vocab=st.integers(1, 6),
    k=st.integers(1, 6),
    ngrams=st.sampled_from([(4, 2), (4, 1), (3, 3), (6, 2)]),
)
def test_incremental_index_matches_a_fresh_index_and_the_definition(ops, vocab, k, ngrams):
    max_n, min_n = ngrams
    running = PromptLookup(max_ngram=max_n, min_ngram=min_n)
    for history in _mutations(ops, vocab):
        expected = scan(history, k, max_n, min_n)
        assert running.propose(history, k).tokens == expected
        assert PromptLookup(max_ngram=max_n, min_ngram=min_n).propose(history, k).tokens == expected


def test_seeded_decode_loop_matches_a_fresh_index():
    rng = random.Random(1234)
    running = PromptLookup()
    history = [rng.randrange(8) for _ in range(200)]
    for step in range(300):
        if step % 50 == 49:
            history = history[:len(history) - rng.randrange(1, 20)]  # rejected / regenerated
        else:
            history = history + [rng.randrange(8) for _ in range(rng.randrange(1, 5))]
        k = rng.randrange(1, 8)
        assert running.propose(history, k).tokens == PromptLookup().propose(history, k).tokens


def test_settle_keeps_the_index_in_step():
    lookup = PromptLookup()
    history = [1, 2, 3, 4, 1, 2]
    assert lookup.propose(history, 2).tokens == [3, 4]
    history = history + [3, 4]
    lookup.settle(history)
    assert lookup.positions_indexed == 7
    assert lookup.propose(history, 3).tokens == [1, 2, 3]
    assert lookup.positions_indexed == 7 and lookup.rebuilds == 0


def test_long_history_is_indexed_incrementally():
    rng = random.Random(7)
    history = [rng.randrange(32000) for _ in range(100_000)]
    history[-3:] = history[5000:5003]  # a quote of an early passage
    lookup = PromptLookup()
    assert lookup.propose(history, 4).tokens == history[5003:5007]
    assert lookup.positions_indexed == len(history) - 1  # every position with a follower, once
    for step in range(20):  # decode steps: one accepted token each time
        history.append(rng.randrange(32000))
        before = lookup.positions_indexed
        lookup.propose(history, 4)
        assert lookup.positions_indexed - before == 1
    history.extend([11, 12, 13])  # three tokens accepted at once
    before = lookup.positions_indexed
    lookup.propose(history, 4)
    assert lookup.positions_indexed - before == 3
    assert lookup.rebuilds == 0


def test_changed_history_rebuilds_and_reset_forgets():
    lookup = PromptLookup()
    lookup.propose([1, 2, 3, 1, 2], 2)
    assert lookup.rebuilds == 0
    assert lookup.propose([1, 2, 3], 2).tokens == []  # shrank: rebuilt, the old "1 2" is gone
    assert lookup.rebuilds == 1
    assert lookup.propose([9, 2, 3, 9, 2], 2).tokens == [3, 9]  # same length, new head and tail
    assert lookup.rebuilds == 2
    lookup.reset()
    assert lookup.propose([5, 6, 5, 6], 1).tokens == [5]


def test_a_change_hidden_in_the_middle_needs_reset():
    # Documented limit of the cheap check: only the length, head and tail are compared.
    history = list(range(40)) + [20, 21]
    lookup = PromptLookup()
    assert lookup.propose(history, 2).tokens == [22, 23]
    edited = list(history)
    edited[20] = 99  # the earlier "20 21" is gone
    assert lookup.propose(edited, 2).tokens == [22, 23]  # stale: the index still has it
    lookup.reset()
    assert lookup.propose(edited, 2).tokens == []
