"""Drafting changes no token: greedy ids identical to plain decoding, sampled output with the
target's distribution, and the state after rollbacks equal to plain decoding's."""

import numpy as np
import pytest

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY, SamplingParams
from engine.models.session import open_session
from engine.speculative.draft_model import DraftIncompatible
from engine.speculative.drafting import Drafting
from engine.protocol.draft_choice import DraftRefused, parse_draft_spec
from tests.stats import chi2_critical, two_sample_chi2

WORDS = "the cat sat on a mat and the dog ran to the park while birds sang over the river".split()


def prompts(n=20):
    rng = np.random.default_rng(5)
    out = []
    for i in range(n):
        phrase = " ".join(rng.choice(WORDS, size=6))
        out.append(f"{phrase}. {' '.join(rng.choice(WORDS, size=4))} {phrase}. {phrase.split()[0]}")
    return out


def run(session, prompt, settings, make_source=None):
    generation = Generation(session, raw_prompt_tokens(session.model, prompt), settings, make_source=make_source)
    list(generation)
    return generation


def drafter(session, spec, draft_max=4):
    make, _ = Drafting(session).plan(parse_draft_spec(spec), draft_max, auto_off=False)
    return make


@pytest.fixture(scope="module")
def tiny(hybrid_tiny):
    session = open_session(str(hybrid_tiny), n_ctx=1024, draft_max=4)
    yield session
    session.close()


@pytest.mark.parametrize("spec", ["lookup", "model:hybrid-tiny-q8", "model:hybrid-draft", "mtp"])
def test_greedy_output_is_identical_for_every_drafter_on_the_hybrid_model(tiny, test_models, spec):
    """For ``mtp`` the tiny model's MTP block has random weights, so it rarely guesses right: its
    guesses, right or wrong, must never change a token, and the rounds it loses are rolled back."""
    if spec.startswith("model:"):
        spec = "model:" + str(test_models[spec.split(":")[1]])
    drafting = Drafting(tiny)
    make, _ = drafting.plan(parse_draft_spec(spec), 4, auto_off=False)
    totals = {"rounds": 0, "accepted": 0, "drafted": 0, "rollbacks": 0}
    try:
        for prompt in prompts():
            plain = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=40))
            drafted = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=40), make)
            assert drafted.token_ids == plain.token_ids, prompt
            assert drafted.source.stats.kind == parse_draft_spec(spec).kind
            for key in totals:
                totals[key] += getattr(drafted.source.stats, key)
    finally:
        drafting.close()
    assert tiny.context.after_decode is None, "no drafter keeps following the target after its request"
    assert totals["accepted"] > 0, totals
    assert totals["rollbacks"] > 0, totals  # partial acceptances happened and were rolled back


PENALISED = SamplingParams(temperature=0.0, repeat_penalty=1.3)


@pytest.mark.parametrize("spec", ["model:hybrid-draft", "mtp"])
def test_greedy_with_a_repeat_penalty_is_identical_for_model_drafters(tiny, test_models, spec):
    """Each drafted position is judged with the answer up to it (engine.speculative.verifier)."""
    if spec.startswith("model:"):
        spec = "model:" + str(test_models[spec.split(":")[1]])
    drafting = Drafting(tiny)
    make, _ = drafting.plan(parse_draft_spec(spec), 4, auto_off=False)
    try:
        accepted, changed = drafted_equals_plain(tiny, make, PENALISED, GREEDY, n_prompts=8, max_tokens=40)
    finally:
        drafting.close()
    assert changed > 0, "the penalty changed some answers"
    assert accepted > 0 or spec == "mtp"


def drafted_equals_plain(session, make, sampling: SamplingParams, other: SamplingParams, *, n_prompts: int,
                         max_tokens: int) -> tuple[int, int]:
    """Asserts drafted answers equal plain ones under ``sampling``; (drafts accepted, answers that
    ``other`` sampling changes)."""
    accepted = changed = 0
    for prompt in prompts(n_prompts):
        plain = run(session, prompt, GenerationSettings(sampling, max_tokens=max_tokens))
        drafted = run(session, prompt, GenerationSettings(sampling, max_tokens=max_tokens), make)
        assert drafted.token_ids == plain.token_ids, prompt
        accepted += drafted.source.stats.accepted
        changed += plain.token_ids != run(session, prompt, GenerationSettings(other, max_tokens=max_tokens)).token_ids
    return accepted, changed


def test_greedy_with_a_repeat_penalty_on_smollm2_is_identical_with_lookup_drafting(smollm2):
    """SmolLM2 quoting: lookup drafts the quote again and again, the penalty rejects many of them."""
    accepted, rollbacks = lookup_quoting_is_identical(smollm2, PENALISED, n_prompts=6)
    assert accepted > 5 and rollbacks > 0


# The penalty's window (repeat_last_n): 8 tokens, and the whole answer (-1), which differs from the default 64
# only past 64 tokens, so these answers run to 100.
@pytest.mark.parametrize("window", [8, -1])
def test_greedy_with_a_repeat_window_is_identical_for_a_model_drafter(tiny, test_models, window):
    windowed = SamplingParams(temperature=0.0, repeat_penalty=1.3, repeat_last_n=window)
    make = drafter(tiny, "model:" + str(test_models["hybrid-draft"]))
    accepted, changed = drafted_equals_plain(tiny, make, windowed, PENALISED, n_prompts=6, max_tokens=100)
    assert changed > 0, "the window changed some answers (against the default 64)"
    assert accepted > 0


@pytest.mark.parametrize("window", [8, -1])
def test_greedy_with_a_repeat_window_on_smollm2_is_identical_with_lookup_drafting(smollm2, window):
    windowed = SamplingParams(temperature=0.0, repeat_penalty=1.3, repeat_last_n=window)
    accepted, rollbacks = lookup_quoting_is_identical(smollm2, windowed, n_prompts=4)
    assert accepted > 0 and rollbacks > 0  # over the whole answer the penalty rejects most of a quote's drafts


def lookup_quoting_is_identical(smollm2, sampling, n_prompts: int) -> tuple[int, int]:
    """SmolLM2 asked to repeat prompts, with and without lookup drafting: the same tokens each time
    (asserted); returns the drafts accepted and the rollbacks, over all prompts."""
    from engine.templates.chat_template import ChatMessage
    from engine.templates.prompts import chat_prompt_tokens

    session = open_session(str(smollm2), n_ctx=2048)
    make = drafter(session, "lookup")
    accepted = rollbacks = 0
    try:
        for prompt in prompts(n_prompts):
            tokens = chat_prompt_tokens(session.model, [ChatMessage("user", f"Repeat exactly: {prompt}")])
            plain = Generation(session, tokens, GenerationSettings(sampling, max_tokens=48))
            list(plain)
            drafted = Generation(session, tokens, GenerationSettings(sampling, max_tokens=48), make_source=make)
            list(drafted)
            assert drafted.token_ids == plain.token_ids
            accepted += drafted.source.stats.accepted
            rollbacks += drafted.source.stats.rollbacks
    finally:
        session.close()
    return accepted, rollbacks


@pytest.mark.parametrize("model", ["hybrid-draft", "smollm2"])
def test_mtp_on_a_model_without_an_mtp_head_is_refused(test_models, smollm2, model):
    session = open_session(str(smollm2 if model == "smollm2" else test_models[model]), n_ctx=256)
    try:
        with pytest.raises(DraftRefused, match="no MTP head"):
            Drafting(session).plan(parse_draft_spec("mtp"), 4)
    finally:
        session.close()


def test_greedy_lookup_on_smollm2_quoting_is_identical(smollm2):
    accepted, rollbacks = lookup_quoting_is_identical(smollm2, GREEDY, n_prompts=10)
    assert accepted > 20 and rollbacks > 0


def test_state_after_rollbacks_equals_plain_decoding(tiny, test_models):
    """After rounds with rejected (rolled back) draft tokens, the next-token logits equal those of
    decoding the same tokens one at a time, up to the rounding that differs between batch shapes
    (a verify batch computes its rows together); a state that kept a rejected token is far off."""
    make = drafter(tiny, "model:" + str(test_models["hybrid-draft"]))
    for prompt in prompts(5):
        drafted = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=30), make)
        assert drafted.source.stats.rollbacks > 0
        tiny.feed([drafted.pending_token])
        after_drafting = tiny.last_logits().copy()
        history, n_prompt = list(tiny.tokens), len(drafted.prompt_tokens)

        tiny.reset()
        tiny.feed(history[:n_prompt])
        for token in history[n_prompt:]:
            tiny.feed([token])
        one_by_one = tiny.last_logits().copy()
        np.testing.assert_allclose(after_drafting, one_by_one, rtol=1e-3, atol=1e-4)
        assert int(np.argmax(after_drafting)) == int(np.argmax(one_by_one))

        tiny.feed([int(np.argmax(one_by_one))])  # what keeping one rejected token would look like
        assert np.abs(tiny.last_logits() - one_by_one).max() > 100 * 1e-3


SAMPLING_CONFIGS = [
    SamplingParams(temperature=1.0, top_k=6, top_p=1.0, min_p=0.0),
    SamplingParams(temperature=1.5, top_k=0, top_p=0.95, min_p=0.0),
    SamplingParams(temperature=2.0, top_k=10, top_p=1.0, min_p=0.02),
    SamplingParams(temperature=1.2, top_k=0, top_p=1.0, min_p=0.01),
    SamplingParams(temperature=1.8, top_k=4, top_p=0.99, min_p=0.0),
]  # (no repeat penalty here: this model never repeats a token within its first three, so a penalty would
#   change nothing; tests/unit/test_acceptance_rule.py checks sampled drafting with one)
RUNS = 600


def first_tokens(session, prefix_blob, prefix_tokens, last, params, seeds, make=None):
    """The 2nd and 3rd generated tokens (the 1st comes from the prompt's logits with or without a
    draft) of runs that all start from the same restored prompt state."""
    out, first_tokens.accepted, first_tokens.rejected = [], 0, 0
    for seed in seeds:
        session.reset()
        assert session.context.state_set(prefix_blob)
        session.tokens = list(prefix_tokens)
        g = Generation(session, [last], GenerationSettings(SamplingParams(**{**params.__dict__, "seed": seed}), 3),
                       reset=False, make_source=make)
        list(g)
        out.append(tuple(g.token_ids[1:3]))
        if make is not None:
            first_tokens.accepted += g.source.stats.accepted
            first_tokens.rejected += g.source.stats.drafted - g.source.stats.accepted
    return out


@pytest.mark.parametrize("params", SAMPLING_CONFIGS, ids=[f"cfg{i}" for i in range(len(SAMPLING_CONFIGS))])
def test_sampled_drafting_keeps_the_target_distribution(tiny, test_models, params):
    tokens = raw_prompt_tokens(tiny.model, "the cat sat on the mat and the dog")
    tiny.reset()
    tiny.feed(tokens[:-1])
    blob = tiny.context.state_get(0)
    make = drafter(tiny, "model:" + str(test_models["hybrid-draft"]), draft_max=3)
    plain = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(RUNS))
    drafted = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(10_000, 10_000 + RUNS), make)
    assert first_tokens.accepted > RUNS / 10 and first_tokens.rejected > RUNS / 10  # both paths of the rule ran
    for position in (0, 1):
        statistic, df = two_sample_chi2([t[position] for t in plain], [t[position] for t in drafted])
        assert df >= 2, "the configuration must spread the tokens over several values"
        assert statistic < chi2_critical(df), (position, statistic, df)


def test_sampled_check_can_fail():
    """The two-sample test does reject samples from different distributions of this size."""
    rng = np.random.default_rng(0)
    a = list(rng.choice(6, size=RUNS, p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.1]))
    b = list(rng.choice(6, size=RUNS, p=[0.2, 0.2, 0.2, 0.2, 0.1, 0.1]))
    statistic, df = two_sample_chi2(a, b)
    assert statistic > chi2_critical(df)


def test_the_first_token_does_not_wait_for_a_draft_model_to_read_the_prompt(tiny, test_models):
    make = drafter(tiny, "model:" + str(test_models["hybrid-draft"]), draft_max=3)
    prompt = raw_prompt_tokens(tiny.model, " ".join(WORDS * 4))
    run = Generation(tiny, prompt, GenerationSettings(GREEDY, max_tokens=8), make_source=make)
    deltas = iter(run)
    next(deltas)
    assert run.source.proposer.tokens == [], "the draft model read before the first token went out"
    list(deltas)
    assert run.source.proposer.tokens[:len(prompt)] == prompt


def test_mismatched_vocabulary_is_refused(tiny, smollm2):
    with pytest.raises(DraftIncompatible, match="vocabulary"):
        Drafting(tiny).plan(parse_draft_spec(f"model:{smollm2}"), 4)


def test_unknown_spec_is_a_clear_error():
    with pytest.raises(DraftRefused, match="auto, off, lookup"):
        parse_draft_spec("fast")


# EAGLE-3 drafting: tests/engine/test_drafting_eagle3.py


def test_a_head_catches_up_on_a_long_reads_tail_only(hybrid_tiny):
    """The MTP head writes its rows when it next drafts, and of a long prompt only the last
    FOLLOW_TAIL (issue 35: every prompt row cost the head a decode); a short one it sees whole."""
    from engine.decoding.sampling import make_rng
    from engine.speculative.head_drafter import FOLLOW_TAIL
    from engine.speculative.mtp import MtpDrafter

    session = open_session(str(hybrid_tiny), n_ctx=2048, draft_max=4)
    try:
        head = MtpDrafter(session, sampling=GREEDY, rng=make_rng(0))
        tokens = raw_prompt_tokens(session.model, " ".join(WORDS * 100))[:1201]
        assert len(tokens) == 1201
        for length in (300, 1200):
            head.attach()
            session.reset()
            session.feed(tokens[:length])
            assert head.head.pos_max() == -1, "nothing is written before the head is needed"
            head.propose(tokens[:length] + [tokens[length]], 2)
            assert head.head.pos_min() == max(1, length - FOLLOW_TAIL)  # the first token pairs with no row
            assert head.head.pos_max() == length - 1
        head.close()
    finally:
        session.close()
