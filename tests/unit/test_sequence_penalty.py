"""The sequence penalty (llama.cpp's DRY): which tokens would continue a run the answer already wrote,
by how much they are penalised, and where a run breaks. Plain numpy; the real model's answers are
checked in tests/app/test_sequence_penalty_cli.py."""

from __future__ import annotations

import numpy as np
import pytest

from engine.decoding.sampling import SamplingParams, distribution
from engine.decoding.sequence_penalty import DEFAULT_ALLOWED, DEFAULT_BASE, Breakers, penalize_sequences, run_lengths

NEWLINE = 9  # the breaker in these tests


def test_the_token_that_followed_the_same_ending_is_the_one_that_continues_the_run():
    # the answer ends "1 2"; earlier "1 2" was followed by 3, a run of two
    assert run_lengths([1, 2, 3, 1, 2], set()) == {3: 2}
    # two earlier places: "5 2" then 4 (a run of one), "1 2" then 3 (two)
    assert run_lengths([5, 2, 4, 1, 2, 3, 1, 2], set()) == {4: 1, 3: 2}


def test_the_longest_run_per_token_counts():
    # "7 1 2" then 3 (three tokens), and "1 2" then 3 again (two): 3 keeps three
    assert run_lengths([7, 1, 2, 3, 0, 1, 2, 3, 7, 1, 2], set()) == {3: 3}


def test_a_breaker_ends_a_run_and_is_never_penalised():
    assert run_lengths([1, 2, NEWLINE, 1, 2], {NEWLINE}) == {}  # what followed "1 2" was a line break
    assert run_lengths([1, NEWLINE, 2, 3, 1, NEWLINE, 2], {NEWLINE}) == {3: 1}  # the run stops at the break
    assert run_lengths([1, 2, 3, 1, 2, NEWLINE], {NEWLINE}) == {}  # the answer ends on a break: a fresh start


def test_runs_shorter_than_allowed_go_free_and_longer_ones_cost_more_and_more():
    logits = np.zeros(8)
    assert penalize_sequences(logits, [2, 3, 2], 1.0, set()) is logits  # a run of one: under the allowance of two
    out = penalize_sequences(logits, [1, 2, 3, 4, 1, 2, 3], 0.8, set())
    assert out[4] == pytest.approx(-0.8 * DEFAULT_BASE ** (3 - DEFAULT_ALLOWED))
    assert np.count_nonzero(out) == 1 and logits[4] == 0  # only the follower, and the input is left alone


def test_a_multiplier_of_zero_is_off():
    logits = np.zeros(8)
    assert penalize_sequences(logits, [1, 2, 3, 1, 2], 0.0, set()) is logits


def test_a_loop_that_greedy_decoding_would_go_round_is_broken():
    """Logits that always prefer the next token of the cycle 1 2 3 4: without the penalty greedy goes
    round; with it, once the cycle has been written, another token wins."""
    def cycle_logits(last: int) -> np.ndarray:
        row = np.zeros(6)
        row[last % 4 + 1] = 2.0
        return row

    def decode(params: SamplingParams) -> list[int]:
        answer = [1]
        for _ in range(12):
            answer.append(int(distribution(cycle_logits(answer[-1]), params, answer).ids[0]))
        return answer

    plain = SamplingParams(temperature=0.0, repeat_penalty=1.0, dry_multiplier=0.0)
    assert decode(plain) == [1, 2, 3, 4] * 3 + [1]
    penalised = decode(SamplingParams(temperature=0.0, repeat_penalty=1.0, dry_multiplier=0.8))
    # the second round costs 3 and 4 a little (runs of two and three); 1 would make a run of four: too dear
    assert penalised[:8] == [1, 2, 3, 4] * 2 and penalised[8] != 1


def test_breakers_are_the_tokens_whose_text_holds_a_line_break_colon_quote_or_star():
    pieces = {0: b"Hello", 1: b"\n", 2: b":", 3: b' "', 4: b"**", 5: b" world", 6: b".\n\n", 7: b"\xff"}
    asked: list[int] = []

    def piece(token: int) -> bytes:
        asked.append(token)
        return pieces[token]

    breakers = Breakers(piece)
    assert [t for t in pieces if t in breakers] == [1, 2, 3, 4, 6]
    assert 1 in breakers and asked.count(1) == 1  # each token's text is asked once
    assert "1" not in breakers
