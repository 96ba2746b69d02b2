"""EAGLE-3 drafting changes no token (issue 33): greedy ids identical to plain decoding at short prompts,
past 512 tokens of context and in each weight type drafting supports; sampled output with the target's
distribution; and a drafter idled by auto-off (EAGLE-3 or MTP) picks up again without changing a token.

The fixture head (``eagle3_tiny``) has random weights. Greedy, it is rarely right, so nearly every round
is rolled back; sampled, its guesses are accepted only as often as its distribution overlaps the
target's (min(1, p/q) per token), which a hot, untruncated sampler makes frequent enough to test both
the accept and the reject path (see ``test_sampled_eagle3_drafting_keeps_the_target_distribution``).
"""

from __future__ import annotations

import llama_cpp
import numpy as np
import pytest

from engine.backends.llama_cpp import quantize
from engine.decoding.generation import GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY, SamplingParams
from engine.models.session import open_session
from engine.speculative.eagle3 import Eagle3Drafter
from engine.speculative.mtp import MtpDrafter
from engine.speculative.policy import DraftPolicy
from engine.speculative.token_sources import SpeculativeSource
from tests.engine.test_drafting import first_tokens, prompts, run
from tests.helpers.eagle3_acceptance import FullChains
from tests.stats import chi2_critical, two_sample_chi2



def eagle3_source(proposer, draft_max=4):
    """A token-source factory drafting with ``proposer`` on every step (no auto-off)."""

    def make(session, sampling, rng):
        proposer.configure(sampling, rng)
        return SpeculativeSource(session, sampling, rng, proposer, FullChains(draft_max))

    return make


@pytest.fixture(scope="module")
def tiny(hybrid_tiny):
    # one thread: a tiny model gains nothing from two, and a busy machine can stall a thread barrier
    session = open_session(str(hybrid_tiny), n_ctx=1024, n_threads=1, draft_max=4)
    yield session
    session.close()


def greedy_is_identical(session, head, texts, max_tokens=40) -> dict[str, int]:
    """Greedy with full 4-token chains from ``head`` against plain decoding, prompt by prompt
    (asserted identical); returns the drafting totals."""
    # p_min 0: the head chains all 4 guesses, however unsure it is
    proposer = Eagle3Drafter(head, session, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)
    make = eagle3_source(proposer)
    totals = {"rounds": 0, "drafted": 0, "accepted": 0, "rollbacks": 0}
    try:
        for text in texts:
            plain = run(session, text, GenerationSettings(GREEDY, max_tokens=max_tokens))
            drafted = run(session, text, GenerationSettings(GREEDY, max_tokens=max_tokens), make)
            assert drafted.token_ids == plain.token_ids, text
            assert drafted.source.stats.kind == "eagle3"
            for key in totals:
                totals[key] += getattr(drafted.source.stats, key)
    finally:
        proposer.close()
    assert session.context.after_decode is None, "the head stops following the target after its request"
    return totals


def test_greedy_output_is_identical_with_an_eagle3_head_on_the_hybrid_model(tiny, eagle3_tiny):
    """The fixture head has random weights: its guesses are mostly wrong, so nearly every round is
    rolled back through the hybrid's planes, and no token may change."""
    totals = greedy_is_identical(tiny, eagle3_tiny, prompts(10))
    assert totals["rounds"] > 100 and totals["drafted"] > 3 * totals["rounds"], totals  # it followed and chained
    assert totals["rollbacks"] > 0, totals


def long_prompt(session, n_tokens: int) -> str:
    text = ""
    for phrase in prompts(200):
        text += phrase + " "
        if len(raw_prompt_tokens(session.model, text)) > n_tokens:
            return text.strip()
    raise AssertionError("the phrases are too short for the prompt asked for")


def test_greedy_eagle3_drafting_past_512_tokens_of_context_is_identical(tiny, eagle3_tiny):
    """Prompts of more than 512 tokens (read in several batches, each followed by the head) and answers
    drafted on from there: every token as plain decoding's."""
    texts = [long_prompt(tiny, 520), long_prompt(tiny, 600) + " the"]
    assert all(len(raw_prompt_tokens(tiny.model, t)) > 512 for t in texts)
    assert len(raw_prompt_tokens(tiny.model, texts[1])) + 40 < tiny.n_ctx
    totals = greedy_is_identical(tiny, eagle3_tiny, texts)
    assert totals["rounds"] > 15 and totals["drafted"] > 3 * totals["rounds"], totals
    assert totals["rollbacks"] > 0, totals


# The weight types this check converts hybrid-tiny to (llama.cpp's own quantizer, its 64-wide rows
# allow the 32-block types; K-quants need 256-wide rows); Q8_0 is the test_models fixture.
WEIGHT_TYPES = ("Q8_0", "F16", "BF16", "Q4_0", "IQ4_NL")


@pytest.mark.parametrize("weight_type", WEIGHT_TYPES)
def test_greedy_eagle3_drafting_is_identical_in_each_weight_type(test_models, eagle3_tiny, tmp_path,
                                                                 weight_type):
    """The same head on hybrid-tiny in other weight types (same hidden size and vocabulary, so it
    fits each): token-identical to plain decoding of that file, or refused where drafting is not exact."""
    from engine.protocol.draft_choice import DraftRefused, parse_draft_spec
    from engine.speculative.drafting import Drafting

    path = (test_models["hybrid-tiny-q8"] if weight_type == "Q8_0"
            else quantize(test_models["hybrid-tiny"], tmp_path / f"hybrid-tiny-{weight_type}.gguf", weight_type))
    session = open_session(str(path), n_ctx=512, n_threads=1, draft_max=4)
    try:
        assert session.model.weight_type == weight_type
        if not session.model.batch_exact:  # this machine's build computes a batch differently
            with pytest.raises(DraftRefused, match="differently in a batch"):
                Drafting(session).plan(parse_draft_spec(f"eagle3:{eagle3_tiny}"), 4)
            pytest.skip(f"drafting is refused for {weight_type} on this machine (not batch-exact)")
        totals = greedy_is_identical(session, eagle3_tiny, prompts(3), max_tokens=30)
    finally:
        session.close()
    assert totals["drafted"] > 3 * totals["rounds"] > 0 and totals["rollbacks"] > 0, totals


# Untruncated and hot: the random head's q overlaps the target's p, so about one drafted token in six is
# accepted (at temperature 1 with top-k, as test_drafting's configurations, it is one in thirty or fewer).
HOT = SamplingParams(temperature=2.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
RUNS = 600
BUCKETS = 16


def test_sampled_eagle3_drafting_keeps_the_target_distribution(tiny, eagle3_tiny, params=HOT):
    """As ``test_drafting.test_sampled_drafting_keeps_the_target_distribution``, with the EAGLE-3 head
    chaining 3 sampled guesses from the first round on. Hot sampling spreads the target over hundreds of
    tokens, so the tokens are compared both as they are (rare ones pooled) and through a fixed function
    of them (id mod 16): both have the same distribution with and without drafting if drafting is exact.
    It catches an acceptance rule that takes what the target can give (chi-square 51 against 30.6); at this
    size it misses a rejection that resamples from p instead of max(0, p - q) (23.5), a subtler bias."""
    tokens = raw_prompt_tokens(tiny.model, "the cat sat on the mat and the dog")
    tiny.reset()
    tiny.feed(tokens[:-1])
    blob = tiny.context.state_get(0)
    proposer = Eagle3Drafter(eagle3_tiny, tiny, sampling=params, rng=np.random.default_rng(0), p_min=0.0)
    try:
        plain = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(RUNS))
        drafted = first_tokens(tiny, blob, tokens[:-1], tokens[-1], params, range(10_000, 10_000 + RUNS),
                               eagle3_source(proposer, draft_max=3))
    finally:
        proposer.close()
    accepted, rejected = first_tokens.accepted, first_tokens.rejected
    assert accepted > RUNS / 4 and rejected > RUNS / 4, (accepted, rejected)  # both paths of the rule ran often
    for position in (0, 1):
        a = [t[position] for t in plain if len(t) > position]  # (a run may end at the end-of-text token)
        b = [t[position] for t in drafted if len(t) > position]
        assert min(len(a), len(b)) > 0.95 * RUNS
        statistic, df = two_sample_chi2([t % BUCKETS for t in a], [t % BUCKETS for t in b])
        assert df == BUCKETS - 1 and statistic < chi2_critical(df), (position, statistic, df)
        statistic, df = two_sample_chi2(a, b)
        assert statistic < chi2_critical(max(df, 1)), (position, statistic, df)


def followed_and_at_once(session, proposer, pending: int) -> tuple[list[int], list[int]]:
    """The head's 4-token chain after what it followed, then after one catch-up over the same history."""
    history = list(session.tokens) + [pending]
    followed = proposer.propose(history, 4).tokens
    proposer.reset()  # an empty head, following again
    session.reset()
    session.feed(history[:-1])
    at_once = proposer.propose(history, 4).tokens
    proposer.finish()
    return followed, at_once


def test_an_eagle3_head_that_followed_drafting_guesses_as_one_that_read_the_history_at_once(tiny, eagle3_tiny):
    """Its rows after rounds, rollbacks and plain steps are those of one catch-up over the whole
    history: the same 4-token chain from either (a row paired with the wrong token or g would not be)."""
    proposer = Eagle3Drafter(eagle3_tiny, tiny, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)

    def make(session, sampling, rng):
        proposer.configure(sampling, rng)
        return SpeculativeSource(session, sampling, rng, proposer, DraftPolicy(4, auto_off=False, start=4))

    chains = set()
    try:
        for prompt in prompts(5):
            drafted = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=30), make)
            assert drafted.source.stats.rollbacks > 0
            followed, at_once = followed_and_at_once(tiny, proposer, drafted.pending_token)
            assert len(followed) == 4 and followed == at_once, prompt
            chains.add(tuple(at_once))
    finally:
        proposer.close()
    assert len(chains) > 1  # the guesses depend on the history


class OffAndOn(DraftPolicy):
    """Auto-off whose verdicts alternate, off first, whatever the speeds: 2 drafting rounds, a plain
    probe, off for a few plain steps (the drafter idle), a probe round, on again, and so on."""

    WARMUP_ROUNDS, PROBE_STEPS, REPROBE_EVERY, REPROBE_ROUNDS = 2, 1, 3, 1

    def __init__(self, max_draft: int) -> None:
        super().__init__(max_draft, auto_off=True, start=max_draft)
        self.verdicts: list[str] = []
        self.idle = 0  # plain steps while off

    def _decide(self) -> None:
        off = len(self.verdicts) % 2 == 0
        self.verdicts.append("off" if off else "on")
        self.ever_off |= off
        self.reason = "switched off" if off else "kept on"
        self._enter("off" if off else "draft")

    def record_plain(self, seconds: float) -> None:
        self.idle += self.mode == "off"
        super().record_plain(seconds)


@pytest.mark.parametrize("kind", ["mtp", "eagle3"])
def test_a_drafter_idled_by_auto_off_picks_up_again_without_changing_a_token(tiny, eagle3_tiny, kind):
    """While auto-off has drafting off the drafter stops following the target; when it is probed again
    its head has missed the rows in between. Its next rows go after that gap and the output stays plain
    decoding's. The MTP head decodes past the gap: it is part of the qwen35 target, whose M-RoPE lets
    llama.cpp take positions that jump forward (``llama_batch_allocr::init``). The EAGLE-3 head has plain
    RoPE, so llama.cpp refuses a position that does not follow its cache (llama_decode returns -1): it
    restarts its cache first (``Eagle3Drafter._head_rows``)."""
    proposer = (MtpDrafter(tiny, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0) if kind == "mtp"
                else Eagle3Drafter(eagle3_tiny, tiny, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0))
    policies: list[OffAndOn] = []
    gaps = []  # (the head's last position, where its next rows go) when rows were missed in between
    memory, decode = proposer.head.memory, proposer.head.decode

    def watched_decode(tokens, rows, start, **kwargs):
        last = int(llama_cpp.llama_memory_seq_pos_max(memory, 0))
        if last >= 0 and start > last + 1:
            gaps.append((last, start))
        return decode(tokens, rows, start, **kwargs)

    proposer.head.decode = watched_decode

    def make(session, sampling, rng):
        proposer.configure(sampling, rng)
        policies.append(OffAndOn(4))
        return SpeculativeSource(session, sampling, rng, proposer, policies[-1])

    rounds_after_idle = 0
    try:
        for prompt in prompts(4):
            plain = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=60))
            drafted = run(tiny, prompt, GenerationSettings(GREEDY, max_tokens=60), make)
            assert drafted.token_ids == plain.token_ids, prompt
            policy = policies[-1]
            assert policy.verdicts[:3] == ["off", "on", "off"] and policy.idle >= 6, (policy.verdicts, policy.idle)
            assert drafted.source.stats.auto_off
            rounds_after_idle += drafted.source.stats.rounds - 2  # the rounds before the first verdict
    finally:
        proposer.close()
    assert tiny.context.after_decode is None
    assert rounds_after_idle > 4 * 4, rounds_after_idle  # it drafted again after each idle spell
    if kind == "mtp":
        assert len(gaps) > 4 * 4, gaps  # rows past a gap, after each idle spell
    else:
        assert not gaps  # the head cleared its cache first
