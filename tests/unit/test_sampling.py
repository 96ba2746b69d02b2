"""Each sampling transform against a direct computation on known logits."""

import numpy as np
import pytest

from engine.protocol import REPEAT_WINDOW
from engine.decoding.sampling import GREEDY, SamplingError, SamplingParams, distribution, make_rng

PROBS = np.array([0.05, 0.5, 0.15, 0.3])  # token 1 most likely, then 3, 2, 0
LOGITS = np.log(PROBS).astype(np.float32)


def only(**kw) -> SamplingParams:
    base = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, dry_multiplier=0.0)
    base.update(kw)
    return SamplingParams(**base)


def dense(params, logits=LOGITS):
    return distribution(logits, params).dense(len(logits))


def test_no_transform_is_softmax():
    np.testing.assert_allclose(dense(only()), PROBS, rtol=1e-6)


def test_greedy_is_point_mass_on_first_argmax():
    logits = np.array([1.0, 3.0, 3.0, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(dense(GREEDY, logits), [0, 1, 0, 0])


def test_top_k_keeps_the_k_largest_renormalised():
    expected = np.where(np.isin(np.arange(4), [1, 3]), PROBS, 0)
    np.testing.assert_allclose(dense(only(top_k=2)), expected / expected.sum(), rtol=1e-6)


def test_top_p_keeps_smallest_prefix_reaching_p():
    # sorted: 0.5, 0.3 (cum 0.8), 0.15 (cum 0.95): p=0.75 keeps two tokens, p=0.9 keeps three
    two = np.array([0, 0.5, 0, 0.3])
    np.testing.assert_allclose(dense(only(top_p=0.75)), two / two.sum(), rtol=1e-6)
    three = np.array([0, 0.5, 0.15, 0.3])
    np.testing.assert_allclose(dense(only(top_p=0.9)), three / three.sum(), rtol=1e-6)


def test_min_p_is_relative_to_the_most_likely():
    # threshold 0.2 * 0.5 = 0.1 drops only the 0.05 token
    kept = np.array([0, 0.5, 0.15, 0.3])
    np.testing.assert_allclose(dense(only(min_p=0.2)), kept / kept.sum(), rtol=1e-6)


def test_temperature_scales_logits():
    z = np.exp(LOGITS.astype(np.float64) / 0.5)
    np.testing.assert_allclose(dense(only(temperature=0.5)), z / z.sum(), rtol=1e-6)


def test_chain_order_top_k_then_top_p_then_min_p_then_temperature():
    logits = np.log(np.array([0.4, 0.25, 0.2, 0.1, 0.05])).astype(np.float32)
    params = SamplingParams(temperature=2.0, top_k=4, top_p=0.7, min_p=0.55)
    # top-k 4 renormalises to [.421, .263, .211, .105]; top-p 0.7 keeps 3 (cum .684 < .7 at two);
    # min-p 0.55 * .421 = .232 keeps two; temperature 2 on the survivors' logits.
    z = np.exp(np.log([0.4, 0.25]) / 2.0)
    expected = np.zeros(5)
    expected[:2] = z / z.sum()
    np.testing.assert_allclose(dense(params, logits), expected, rtol=1e-6)


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    logits = np.random.default_rng(1).normal(size=1000).astype(np.float32)
    params = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    dist = distribution(logits, params)
    draw = lambda seed: [dist.sample(rng) for rng in [make_rng(seed)] for _ in range(50)]
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_sampling_frequencies_follow_the_distribution():
    dist = distribution(LOGITS, only())
    rng = make_rng(3)
    counts = np.bincount([dist.sample(rng) for _ in range(20000)], minlength=4)
    expected = PROBS * 20000
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 11.34  # chi-square, 3 degrees of freedom, alpha 0.01


@pytest.mark.parametrize("kw, fragment", [
    ({"temperature": -1}, "temperature"),
    ({"top_k": -2}, "top-k"),
    ({"top_p": 0.0}, "top-p"),
    ({"top_p": 1.5}, "top-p"),
    ({"min_p": 1.0}, "min-p"),
    ({"seed": -1}, "seed"),
    ({"repeat_penalty": 0.9}, "repeat penalty"),
    ({"repeat_penalty": 2.5}, "repeat penalty"),
    ({"repeat_penalty": float("nan")}, "repeat penalty"),
    ({"repeat_last_n": -2}, "repeat-last-n"),
    ({"repeat_last_n": 2**31}, "repeat-last-n"),
    ({"repeat_last_n": 1.5}, "repeat-last-n"),
])
def test_invalid_settings_say_which(kw, fragment):
    with pytest.raises(SamplingError, match=fragment):
        SamplingParams(**kw).validate()


# --- the repeat penalty (llama.cpp's rule, over the answer's last REPEAT_WINDOW tokens) ------------

SIGNED = np.array([2.0, -1.0, 1.0, 0.5], dtype=np.float32)  # a positive and a negative logit to penalise


def test_repeat_penalty_divides_positive_and_multiplies_negative_logits_once_per_token():
    params = only(repeat_penalty=1.5)
    penalised = np.array([2.0 / 1.5, -1.0 * 1.5, 1.0, 0.5])
    z = np.exp(penalised - penalised.max())
    # token 0 appears three times and token 1 twice: each is penalised once, as llama.cpp's penalty does
    np.testing.assert_allclose(distribution(SIGNED, params, [0, 1, 0, 0, 1]).dense(4), z / z.sum(), rtol=1e-6)
    np.testing.assert_allclose(distribution(SIGNED, params).dense(4), dense(only(), SIGNED), rtol=1e-6)


def test_repeat_penalty_of_one_changes_nothing():
    np.testing.assert_allclose(distribution(SIGNED, only(), [0, 1, 2, 3]).dense(4), dense(only(), SIGNED))


def test_repeat_penalty_looks_only_at_the_last_window_of_tokens():
    params = only(repeat_penalty=2.0)
    old_then_new = [0] + [3] * REPEAT_WINDOW  # token 0 is one token too far back
    np.testing.assert_allclose(distribution(SIGNED, params, old_then_new).dense(4),
                               distribution(SIGNED, params, [3]).dense(4))
    assert distribution(SIGNED, params, [0] + [3] * (REPEAT_WINDOW - 1)).prob(0) < dense(only(), SIGNED)[0]


def test_greedy_takes_the_argmax_after_the_penalty():
    logits = np.array([3.0, 2.5, 0.0], dtype=np.float32)
    assert distribution(logits, GREEDY, [0]).ids.tolist() == [0]  # no penalty: the repeat wins
    penalised = SamplingParams(temperature=0.0, repeat_penalty=1.25)
    assert distribution(logits, penalised, [0]).ids.tolist() == [1]
    assert logits.tolist() == [3.0, 2.5, 0.0], "the caller's logits are left as they were"


# --- the penalty's window, repeat_last_n (llama.cpp's penalty_last_n: -1 all, 0 off) -----------------

def test_the_window_is_the_requests_repeat_last_n():
    params = only(repeat_penalty=2.0, repeat_last_n=4)
    np.testing.assert_allclose(distribution(SIGNED, params, [0, 3, 3, 3, 3]).dense(4),
                               distribution(SIGNED, params, [3]).dense(4))  # token 0 is 5 back: out of a 4-window
    assert distribution(SIGNED, params, [0, 3, 3, 3]).prob(0) < dense(only(), SIGNED)[0]


def test_a_window_of_minus_one_is_the_whole_answer_and_zero_is_no_penalty():
    long_ago = [0] + [3] * (10 * REPEAT_WINDOW)
    whole = only(repeat_penalty=2.0, repeat_last_n=-1)
    assert distribution(SIGNED, whole, long_ago).prob(0) < distribution(SIGNED, only(repeat_penalty=2.0), long_ago).prob(0)
    np.testing.assert_allclose(distribution(SIGNED, only(repeat_penalty=2.0, repeat_last_n=0), [0, 1, 2, 3]).dense(4),
                               dense(only(), SIGNED))


def test_the_window_comes_from_the_protocols_sampling_spec():
    from engine import protocol as p

    assert SamplingParams().repeat_last_n == p.SamplingSpec().repeat_last_n == REPEAT_WINDOW == 64
    assert SamplingParams.from_spec(p.SamplingSpec(repeat_last_n=-1)).repeat_last_n == -1
