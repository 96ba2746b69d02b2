"""The speculative acceptance rule keeps the target's distribution: statistical checks of verify.

No model: the target is hand-made logits whose softmax is a known ``p``; the drafter samples its
tokens from a known ``q`` with its own seeded generator and hands ``q`` to ``verify``. Over many
rounds the tokens ``verify`` emits must be distributed as ``p`` (and, for two-token drafts, as the
target's joint distribution), whatever ``q`` is. Each comparison is a chi-square goodness-of-fit
test at alpha = 0.01 with fixed seeds, so the outcome is deterministic. Cells where the target has
zero probability are excluded from the statistic and must be empty.

Round counts: 100,000 for each of the four main single-token cases and 20,000 two-token generations
(these are marked slow: every round goes through ``verify`` alone, about 30-50 µs a round);
5,000-10,000 for the side cases, and 100,000 for the vectorised wrong-rule check.
"""

import math

import numpy as np
import pytest

from engine.decoding.sampling import GREEDY, SamplingParams, TokenDistribution, distribution
from engine.speculative.verifier import verify
from tests.stats import regularized_lower_gamma

PLAIN = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)  # == softmax

# Upper 1% points of the chi-square distribution (the 0.99 quantile) by degrees of freedom, from the
# standard table (NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.4, "Critical
# Values of the Chi-Square Distribution"). test_critical_values_are_the_99th_percentile re-derives
# them from the regularized incomplete gamma function, since scipy is not a dependency.
CHI2_99 = {1: 6.635, 2: 9.210, 3: 11.345, 4: 13.277, 5: 15.086, 6: 16.812, 7: 18.475,
           8: 20.090, 9: 21.666, 10: 23.209, 15: 30.578, 20: 37.566, 21: 38.932, 22: 40.289,
           23: 41.638, 24: 42.980}

ROUNDS = 100_000


def logits(p) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p / p.sum())  # zero mass -> -inf -> probability exactly 0 after softmax


def sparse(q) -> TokenDistribution:
    """A drafter's distribution listing only its support (as a real drafter's might)."""
    q = np.asarray(q, dtype=np.float64)
    ids = np.flatnonzero(q)
    return TokenDistribution(ids.astype(np.int64), q[ids] / q[ids].sum())


def chi_square(samples: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic and degrees of freedom over the cells where ``probs`` > 0."""
    probs = np.asarray(probs, dtype=np.float64).ravel()
    counts = np.bincount(samples, minlength=probs.size)
    support = probs > 0
    assert counts.size == probs.size and counts[~support].sum() == 0, "a zero-probability outcome"
    expected = samples.size * probs[support]
    return float(((counts[support] - expected) ** 2 / expected).sum()), int(support.sum()) - 1


def assert_fits(samples, probs):
    stat, df = chi_square(np.asarray(samples), probs)
    assert stat < CHI2_99[df], f"chi-square {stat:.1f} >= {CHI2_99[df]} (df={df})"


def single_token_rounds(p, draw_q, claim_q, fixed_token=None, n=ROUNDS, seed=0):
    """Run ``n`` one-token rounds; return the first emitted token of each and the accept count.

    Draft tokens come from ``draw_q`` (or are ``fixed_token``); ``verify`` is told ``claim_q``."""
    draft_rng, verify_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    if fixed_token is None:
        drafts = draft_rng.choice(len(draw_q), size=n, p=np.asarray(draw_q) / np.sum(draw_q))
    else:
        drafts = np.full(n, fixed_token)
    rows = [logits(p), logits(np.ones(len(p)))]  # the second row only feeds the bonus token
    claim = None if claim_q is None else sparse(claim_q)
    first = np.empty(n, dtype=np.int64)
    accepted = 0
    for i, d in enumerate(drafts.tolist()):
        verdict = verify([d], [claim], rows, PLAIN, verify_rng)
        assert len(verdict.tokens) == verdict.n_accepted + 1
        first[i] = verdict.tokens[0]
        accepted += verdict.n_accepted
    return first, accepted


def assert_rate(accepted, n, rate):
    """The accept count is Binomial(n, rate); allow five standard deviations."""
    assert abs(accepted - n * rate) <= 5 * math.sqrt(n * rate * (1 - rate)) + 1e-9


# (p, q) pairs over small vocabularies.
PAIRS = {
    "overlapping": ([0.10, 0.20, 0.30, 0.25, 0.15], [0.30, 0.10, 0.10, 0.20, 0.30]),
    # q has no mass on token 0 (p: 0.3), p has none on token 5 (q: 0.3).
    "zeros_both_ways": ([0.30, 0.25, 0.20, 0.15, 0.10, 0.00], [0.00, 0.10, 0.30, 0.20, 0.10, 0.30]),
    # A peaked target against a flat drafter that spreads over tokens the target rules out.
    "peaked_vs_flat": ([0.60, 0.20, 0.10, 0.05, 0.05, 0.0, 0.0, 0.0], [1 / 8] * 8),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PAIRS))
def test_sampled_single_token_draft_keeps_the_target_distribution(name):
    p, q = (np.asarray(x) for x in PAIRS[name])
    first, accepted = single_token_rounds(p, q, q, seed=11)
    assert_fits(first, p)
    assert_rate(accepted, ROUNDS, np.minimum(p, q).sum())  # P(accept) = sum min(p, q)


@pytest.mark.slow
def test_deterministic_draft_keeps_the_target_distribution():
    p = np.array([0.10, 0.20, 0.30, 0.25, 0.15])
    first, accepted = single_token_rounds(p, None, None, fixed_token=2, seed=21)
    assert_fits(first, p)
    assert_rate(accepted, ROUNDS, p[2])


def test_deterministic_draft_of_an_impossible_token_is_never_accepted():
    p = np.array([0.4, 0.3, 0.3, 0.0])
    first, accepted = single_token_rounds(p, None, None, fixed_token=3, n=10_000, seed=31)
    assert accepted == 0
    assert_fits(first, p)


# Two-token drafts. The toy target's next-token distribution depends on the position and on the
# previous token, so row 1 of target_rows must be the one for the drafted first token.
P1 = np.array([0.35, 0.25, 0.20, 0.15, 0.05])
P2 = np.array([  # P2[a] = target distribution of the second token after first token a
    [0.50, 0.20, 0.10, 0.10, 0.10],
    [0.10, 0.40, 0.30, 0.20, 0.00],
    [0.20, 0.20, 0.20, 0.20, 0.20],
    [0.05, 0.05, 0.10, 0.30, 0.50],
    [0.30, 0.00, 0.30, 0.00, 0.40],
])
Q1 = np.array([0.10, 0.30, 0.30, 0.00, 0.30])
Q2 = np.array([  # the drafter's guess for the second token after a
    [0.20, 0.20, 0.20, 0.20, 0.20],
    [0.40, 0.10, 0.10, 0.10, 0.30],
    [0.60, 0.10, 0.10, 0.10, 0.10],
    [0.00, 0.30, 0.30, 0.40, 0.00],
    [0.10, 0.50, 0.10, 0.20, 0.10],
])
FLAT = np.full(5, 0.2)  # target and drafter for the third position (only bonus tokens use it)
TWO_TOKEN_SAMPLES = 20_000
L1, L2, L_FLAT = logits(P1), [logits(row) for row in P2], logits(FLAT)
S1, S2, S_FLAT = sparse(Q1), [sparse(row) for row in Q2], sparse(FLAT)


def _draw(rng, q) -> int:
    return int(np.searchsorted(np.cumsum(q), rng.random() * q.sum(), side="right"))


def first_two_tokens(draft_rng, verify_rng) -> tuple[int, int]:
    """Generate until two tokens exist: one two-token round, and a second round if the first
    draft token was rejected (the target then emitted one token only)."""
    d1 = _draw(draft_rng, Q1)
    d2 = _draw(draft_rng, Q2[d1])
    verdict = verify([d1, d2], [S1, S2[d1]], [L1, L2[d1], L_FLAT], PLAIN, verify_rng)
    if len(verdict.tokens) >= 2:
        return verdict.tokens[0], verdict.tokens[1]
    a = verdict.tokens[0]
    e1 = _draw(draft_rng, Q2[a])
    e2 = _draw(draft_rng, FLAT)
    again = verify([e1, e2], [S2[a], S_FLAT], [L2[a], L_FLAT, L_FLAT], PLAIN, verify_rng)
    return a, again.tokens[0]


@pytest.mark.slow
def test_two_token_drafts_keep_the_joint_distribution():
    draft_rng, verify_rng = np.random.default_rng(41), np.random.default_rng(42)
    pairs = np.array([first_two_tokens(draft_rng, verify_rng) for _ in range(TWO_TOKEN_SAMPLES)])
    joint = P1[:, None] * P2  # P(first = a, second = b) = p1(a) p2(b | a)
    assert_fits(pairs[:, 0] * 5 + pairs[:, 1], joint)


PENALISED = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=2.0, dry_multiplier=0.0)
ANSWER = [0]  # the answer so far (its last token pending): token 0 is penalised from the start


def first_two_penalised_tokens(draft_rng, verify_rng, params=PENALISED, answer=ANSWER) -> tuple[int, int]:
    """:func:`first_two_tokens` with a repeat penalty: the second token's history holds the first."""
    d1 = _draw(draft_rng, Q1)
    d2 = _draw(draft_rng, Q2[d1])
    verdict = verify([d1, d2], [S1, S2[d1]], [L1, L2[d1], L_FLAT], params, verify_rng, recent=answer)
    if len(verdict.tokens) >= 2:
        return verdict.tokens[0], verdict.tokens[1]
    a = verdict.tokens[0]
    e1 = _draw(draft_rng, Q2[a])
    again = verify([e1], [S2[a]], [L2[a], L_FLAT], params, verify_rng, recent=[*answer, a])
    return a, again.tokens[0]


# (window, answer so far): the default window; a window of one token, so the second token's history is
# the first token alone (token 4, written before it, no longer counts); the whole answer (-1).
WINDOWS = [(64, ANSWER), (1, [0, 4]), (-1, [4] + [1] * 70)]


@pytest.mark.parametrize("window, answer", WINDOWS, ids=[f"window{w}" for w, _ in WINDOWS])
def test_two_token_drafts_with_a_repeat_penalty_keep_plain_decodings_joint_distribution(window, answer):
    """Plain decoding draws the first token from P1 penalised for the window's tokens, the second from
    P2[a] penalised for the window after a; drafted rounds must give that joint distribution, whatever q is."""
    params = SamplingParams(**{**PENALISED.__dict__, "repeat_last_n": window})
    draft_rng, verify_rng = np.random.default_rng(51), np.random.default_rng(52)
    pairs = np.array([first_two_penalised_tokens(draft_rng, verify_rng, params, answer)
                      for _ in range(TWO_TOKEN_SAMPLES)])
    first = distribution(L1, params, answer).dense(5)
    second = np.array([distribution(L2[a], params, [*answer, a]).dense(5) for a in range(5)])
    if window != 64:  # the window changes what plain decoding draws, so the check tells windows apart
        default = SamplingParams(**{**PENALISED.__dict__, "repeat_last_n": 64})
        default_second = np.array([distribution(L2[a], default, [*answer, a]).dense(5) for a in range(5)])
        assert not np.allclose(first[:, None] * second, distribution(L1, default, answer).dense(5)[:, None] * default_second)
    assert_fits(pairs[:, 0] * 5 + pairs[:, 1], first[:, None] * second)


def test_two_token_drafts_with_the_sequence_penalty_keep_plain_decodings_joint_distribution():
    """The answer 1 2 3 1 2 makes 3 continue a run of two (penalised); after a drafted 3 the run is
    1 2 3, so 1 is penalised harder at the second position: the verifier must see the draft's own
    tokens in each position's history."""
    params = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, dry_multiplier=2.0)
    answer = [1, 2, 3, 1, 2]
    draft_rng, verify_rng = np.random.default_rng(53), np.random.default_rng(54)
    pairs = np.array([first_two_penalised_tokens(draft_rng, verify_rng, params, answer)
                      for _ in range(TWO_TOKEN_SAMPLES)])
    first = distribution(L1, params, answer).dense(5)
    second = np.array([distribution(L2[a], params, [*answer, a]).dense(5) for a in range(5)])
    off = SamplingParams(**{**params.__dict__, "dry_multiplier": 0.0})
    assert first[3] < distribution(L1, off, answer).dense(5)[3]  # the penalty is at work here
    assert second[3][1] < distribution(L2[3], params, answer).dense(5)[1]  # and the draft's token counts
    assert_fits(pairs[:, 0] * 5 + pairs[:, 1], first[:, None] * second)


# Greedy: no randomness at all.
def rows_with_argmax(argmaxes, vocab=6):
    rows = []
    for i, a in enumerate(argmaxes):
        row = np.linspace(0.0, 1.0, vocab)[::-1].copy() * (i + 1)
        row[a] = 10.0
        rows.append(row)
    return rows


@pytest.mark.parametrize("draft, tokens, n_accepted", [
    ([3, 1, 4], [3, 1, 4, 0], 3),  # all match: the target's argmax after the draft is appended
    ([3, 1, 2], [3, 1, 4], 2),  # longest matching prefix, then the target's own token
    ([0, 1, 4], [3], 0),
    ([], [3], 0),
])
def test_greedy_accepts_the_longest_argmax_prefix(draft, tokens, n_accepted):
    rows = rows_with_argmax([3, 1, 4, 0])
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    verdict = verify(draft, [sparse(FLAT)] * len(draft), rows[:len(draft) + 1], GREEDY, rng)
    assert (verdict.tokens, verdict.n_accepted) == (tokens, n_accepted)
    assert rng.bit_generator.state == state  # greedy draws nothing


def test_greedy_ties_go_to_the_first_argmax():
    tied = np.array([0.0, 5.0, 5.0, 1.0])
    rng = np.random.default_rng(0)
    assert verify([2], [None], [tied, tied], GREEDY, rng).tokens == [1]
    assert verify([1], [None], [tied, tied], GREEDY, rng).tokens == [1, 1]


def test_greedy_with_a_repeat_penalty_judges_each_position_with_its_own_history():
    """Plain greedy decoding picks 1, 2, 0 here (each pick penalised from then on); a verifier that
    gave every position the history before the draft would want 1 again at the second position."""
    row = np.array([3.0, 2.5, 2.45, -1.0])
    params = SamplingParams(temperature=0.0, repeat_penalty=1.25)
    answer = [0]
    plain = []
    for _ in range(3):  # plain decoding: the answer grows by each pick
        plain.append(int(distribution(row, params, answer + plain).ids[0]))
    assert plain == [1, 2, 0]
    rng = np.random.default_rng(0)
    assert verify([1, 2], [None, None], [row, row, row], params, rng, recent=answer).tokens == plain
    assert verify([1, 1], [None, None], [row, row, row], params, rng, recent=answer).tokens == [1, 2]


def test_greedy_with_a_short_window_judges_each_position_with_its_own_window():
    """With a one-token window plain greedy decoding picks 1, 0, 1 here (only the last pick is
    penalised); a verifier with the default window would refuse 0 at the second position."""
    row = np.array([3.0, 2.5, 2.45, -1.0])
    params = SamplingParams(temperature=0.0, repeat_penalty=1.25, repeat_last_n=1)
    answer, plain = [0], []
    for _ in range(3):
        plain.append(int(distribution(row, params, answer + plain).ids[0]))
    assert plain == [1, 0, 1]
    rng = np.random.default_rng(0)
    assert verify([1, 0], [None, None], [row, row, row], params, rng, recent=answer).tokens == plain
    whole = SamplingParams(temperature=0.0, repeat_penalty=1.25, repeat_last_n=-1)
    long_ago = [0] + [3] * 100  # token 0 far beyond the default window: only the whole answer holds it
    assert verify([1, 2], [None, None], [row, row, row], whole, rng, recent=long_ago).tokens == [1, 2, 0]
    default = SamplingParams(temperature=0.0, repeat_penalty=1.25)
    assert verify([1, 2], [None, None], [row, row, row], default, rng, recent=long_ago).tokens == [0]


# The check has teeth: wrong rules fail it by a wide margin.
def test_a_drafter_that_misreports_q_is_caught():
    # The drafter samples from q_true but tells verify q = p, so every draft is accepted and the
    # output follows q_true instead of p.
    p = np.array([0.10, 0.20, 0.30, 0.25, 0.15])
    q_true = np.array([0.60, 0.10, 0.10, 0.10, 0.10])
    first, accepted = single_token_rounds(p, q_true, p, n=5_000, seed=51)
    assert accepted == 5_000
    stat, df = chi_square(first, p)
    assert stat > 10 * CHI2_99[df]


def test_resampling_from_p_after_a_rejection_is_caught():
    # A classic mistake, vectorised here: accept with min(1, p/q) but on rejection sample from p
    # instead of the residual max(0, p - q). Output = min(p, q) + (1 - sum min(p, q)) p != p.
    p, q = (np.asarray(x) for x in PAIRS["overlapping"])
    rng = np.random.default_rng(61)
    drafts = rng.choice(5, size=ROUNDS, p=q)
    accept = rng.random(ROUNDS) < np.minimum(1.0, p[drafts] / q[drafts])
    first = np.where(accept, drafts, rng.choice(5, size=ROUNDS, p=p))
    stat, df = chi_square(first, p)
    assert stat > 10 * CHI2_99[df]
    # ... while the same vectorised harness with the right residual passes.
    residual = np.maximum(p - q, 0.0)
    right = np.where(accept, drafts, rng.choice(5, size=ROUNDS, p=residual / residual.sum()))
    assert_fits(right, p)


def test_a_deterministic_claim_is_safe_even_for_a_sampled_draft():
    # With q = None the rule emits p for every fixed draft token, so it stays exact however the
    # token was chosen (only the acceptance rate suffers). Reporting None is never unsafe.
    p, q = (np.asarray(x) for x in PAIRS["overlapping"])
    first, accepted = single_token_rounds(p, q, None, n=10_000, seed=71)
    assert_fits(first, p)
    assert_rate(accepted, 10_000, float((p * q).sum()))


def test_critical_values_are_the_99th_percentile():
    for df, value in CHI2_99.items():
        # chi-square CDF with df degrees of freedom at x is P(df / 2, x / 2)
        assert regularized_lower_gamma(df / 2, value / 2) == pytest.approx(0.99, abs=1e-4)
