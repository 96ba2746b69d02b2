"""The constraint's mask (engine.decoding.constraint) against the fully masked row, on a toy grammar.

Asking the grammar in blocks of the best values must give exactly the distribution the sampler's
transforms give over the whole row with every disallowed token masked out: for greedy (ties to the
lowest id), top-k, min-p, top-p and plain temperature, with ties at the blocks' edges. The blocks
are made small here so every path (decided at the first token, in a block, or only by the whole
vocabulary) is taken.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decoding.constraint import Constraint, ConstraintStuck, settled
from engine.decoding.sampling import GREEDY, SamplingParams, distribution, transform

N_VOCAB = 300
EOG = 299
SMALL_BLOCKS = (1, 4, 16)
PARAMS = {
    "greedy": GREEDY,
    "defaults": SamplingParams(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0,
                               dry_multiplier=0.0),
    "top_k_only": SamplingParams(temperature=1.0, top_k=5, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                 dry_multiplier=0.0),
    "min_p_only": SamplingParams(temperature=0.8, top_k=0, top_p=1.0, min_p=0.1, repeat_penalty=1.0,
                                 dry_multiplier=0.0),
    "top_p_only": SamplingParams(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0, repeat_penalty=1.0,
                                 dry_multiplier=0.0),
    "temperature_only": SamplingParams(temperature=1.3, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                       dry_multiplier=0.0),
}


class ToyGrammar:
    """A grammar state over a fixed set of allowed ids (end of generation only when ``complete``);
    ``accept`` refuses a token it does not allow, as llama.cpp's would abort."""

    def __init__(self, allowed: np.ndarray, complete: bool = False) -> None:
        self.allowed_ids, self.complete = allowed.copy(), complete
        self.allowed_ids[EOG] = complete
        self.asked: list[int] = []
        self.accepted: list[int] = []
        self.closed = False

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        self.asked.extend(int(i) for i in ids)
        return self.allowed_ids[ids]

    def accept(self, token: int) -> None:
        if not self.allowed_ids[token]:  # the contract: refuse, unchanged (llama.cpp's own would abort)
            raise RuntimeError(f"the grammar does not allow token {token} here")
        self.accepted.append(token)

    def close(self) -> None:
        self.closed = True


def masks(banned_ids=()) -> tuple[np.ndarray, np.ndarray]:
    banned = np.zeros(N_VOCAB, dtype=bool)
    banned[list(banned_ids)] = True
    eog = np.zeros(N_VOCAB, dtype=bool)
    eog[EOG] = True
    return banned, eog


def constraint(allowed: np.ndarray, banned_ids=(), complete=False, blocks=SMALL_BLOCKS) -> Constraint:
    return Constraint(ToyGrammar(allowed, complete), *masks(banned_ids), blocks=blocks)


def fully_masked(row: np.ndarray, allowed: np.ndarray, banned_ids=(), complete=False) -> np.ndarray:
    keep = allowed.copy()
    keep[list(banned_ids)] = False
    keep[EOG] = complete
    return np.where(keep, row, -np.inf)


def dense(d, n=N_VOCAB) -> np.ndarray:
    return d.dense(n)


rows = st.builds(lambda seed, ties: _row(seed, ties), st.integers(0, 2**32 - 1), st.booleans())
densities = st.sampled_from([0.005, 0.02, 0.1, 0.5, 1.0])


def _row(seed: int, ties: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ties:  # few distinct values: ties at every block's edge
        return rng.integers(0, 6, N_VOCAB).astype(np.float32)
    return (rng.standard_normal(N_VOCAB) * 3).astype(np.float32)


def _allowed(seed: int, density: float) -> np.ndarray:
    allowed = np.random.default_rng(seed + 1).random(N_VOCAB) < density
    allowed[20 + seed % 250] = True  # never nothing at all (20..269: not banned, not the end)
    return allowed


@settings(max_examples=300, deadline=None)
@given(row=rows, seed=st.integers(0, 2**32 - 1), density=densities, name=st.sampled_from(sorted(PARAMS)))
def test_the_block_procedure_gives_the_fully_masked_rows_distribution(row, seed, density, name):
    params = PARAMS[name]
    allowed = _allowed(seed, density)
    banned = [3, 17]
    got = distribution(row, params, constraint=constraint(allowed, banned))
    want = transform(fully_masked(row, allowed, banned), params)
    if params.greedy or len(set(row.tolist())) == N_VOCAB or params.top_k == 0:
        np.testing.assert_allclose(dense(got), dense(want), rtol=1e-9, atol=1e-12)
    else:  # top-k cutting through tied values keeps the lowest ids (argpartition's choice is arbitrary): the same
        # probabilities on other tied ids
        assert set(got.ids.tolist()) <= set(np.flatnonzero(np.isfinite(fully_masked(row, allowed, banned))).tolist())
        np.testing.assert_allclose(np.sort(got.probs), np.sort(want.probs[want.probs > 0]), rtol=1e-9, atol=1e-12)


def test_greedy_breaks_ties_to_the_lowest_allowed_id_as_argmax_does():
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[[40, 7, 90]] = 5.0  # tied best values; 7 is not allowed
    allowed = np.ones(N_VOCAB, dtype=bool)
    allowed[7] = False
    got = distribution(row, GREEDY, constraint=constraint(allowed))
    assert int(got.ids[0]) == 40 == int(np.argmax(fully_masked(row, allowed)))


def test_greedy_asks_about_the_best_token_only_when_it_is_allowed():
    row = np.arange(N_VOCAB, dtype=np.float32)
    allowed = np.ones(N_VOCAB, dtype=bool)
    c = constraint(allowed, blocks=(1, 64, 1024))
    assert int(distribution(row, GREEDY, constraint=c).ids[0]) == EOG - 1  # the best, EOG, is not allowed yet
    assert c.state.asked[0] == EOG and len(c.state.asked) == 64  # the best, then the block of the 64 best
    c = constraint(allowed, blocks=(1, 64, 1024))
    c.took(int(distribution(row, GREEDY, constraint=c).ids[0]))
    row[EOG] = -1.0
    c.state.asked.clear()
    assert int(distribution(row, GREEDY, constraint=c).ids[0]) == EOG - 1
    assert c.state.asked == [EOG - 1]  # allowed: nothing else asked


def test_a_sampled_choice_at_a_narrow_place_asks_the_whole_vocabulary_only_when_it_must():
    row = np.random.default_rng(0).standard_normal(N_VOCAB).astype(np.float32) * 3
    allowed = np.zeros(N_VOCAB, dtype=bool)
    allowed[np.argsort(-row)[:50]] = True  # the 50 best are allowed: top-40 is decided inside a block
    c = constraint(allowed, blocks=(1, 64, 1024))
    distribution(row, PARAMS["defaults"], constraint=c)
    assert c.asked <= 64
    worst = np.argsort(row[:EOG])[:2]
    only_two = np.zeros(N_VOCAB, dtype=bool)
    only_two[worst] = True  # the two worst: nothing short of the whole row decides
    c = constraint(only_two, blocks=(1, 64, 1024))
    got = distribution(row, PARAMS["temperature_only"], constraint=c)
    assert set(got.ids.tolist()) == set(worst.tolist()) and c.asked == N_VOCAB


def test_settled_by_min_p_and_by_top_p():
    params = PARAMS["min_p_only"]
    values = np.array([10.0, 9.0])
    assert settled(values, bound=10.0 + np.log(0.1), n_unasked=1000, params=params)
    assert not settled(values, bound=9.0, n_unasked=1000, params=params)
    top_p = PARAMS["top_p_only"]
    assert settled(np.array([10.0, 0.0]), bound=-5.0, n_unasked=10, params=top_p)  # the best holds > 0.9 anyway
    assert not settled(np.array([10.0, 9.9]), bound=9.8, n_unasked=10, params=top_p)


def test_end_of_generation_only_when_the_grammar_is_complete_and_control_tokens_never():
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[EOG], row[3], row[5] = 9.0, 8.0, 1.0  # 3 is a control token
    allowed = np.zeros(N_VOCAB, dtype=bool)
    allowed[[3, 5]] = True
    assert int(distribution(row, GREEDY, constraint=constraint(allowed, banned_ids=[3])).ids[0]) == 5
    done = constraint(allowed, banned_ids=[3], complete=True)
    assert int(distribution(row, GREEDY, constraint=done).ids[0]) == EOG
    done.took(EOG)
    assert done.state.accepted == []  # the end is not fed to the grammar


def test_took_refuses_a_token_the_grammar_rejects_and_the_grammar_stays_where_it_was():
    allowed = np.zeros(N_VOCAB, dtype=bool)
    allowed[[1, 2]] = True
    c = constraint(allowed, banned_ids=[2])
    c.took(1)
    for token in (2, 9, EOG):  # banned, rejected, the end before completion
        with pytest.raises(RuntimeError, match="does not allow"):
            c.took(token)
    assert c.state.accepted == [1]


def test_nothing_allowed_is_a_clear_failure():
    c = constraint(np.zeros(N_VOCAB, dtype=bool))
    with pytest.raises(ConstraintStuck, match="no token"):
        distribution(np.zeros(N_VOCAB, dtype=np.float32), GREEDY, constraint=c)


class Gate:
    def __init__(self) -> None:
        self.passed = False
        self.seen: list[int] = []

    def see(self, token: int) -> None:
        self.seen.append(token)
        self.passed = token == 42


def test_a_reasoning_gate_holds_the_mask_off_but_bans_the_end_until_the_block_closes():
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[EOG], row[100] = 9.0, 8.0
    allowed = np.zeros(N_VOCAB, dtype=bool)
    allowed[7] = True
    c = Constraint(ToyGrammar(allowed), *masks(), gate=Gate())
    assert int(distribution(row, GREEDY, constraint=c).ids[0]) == 100  # not masked, but no end
    c.took(100)
    c.took(42)
    assert c.masking and c.state.accepted == [] and c.gate.seen == [100, 42]
    assert int(distribution(row, GREEDY, constraint=c).ids[0]) == 7
