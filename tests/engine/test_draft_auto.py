"""``auto``'s choice in the worker (engine.speculative.drafting): the EAGLE-3 head the app sends if it
fits, else the model's MTP head, else prompt lookup; a head that does not fit is passed over in
silence, and no choice changes a token."""

from __future__ import annotations

import numpy as np
import pytest

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.protocol import DraftSpec
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.speculative.drafting import Drafting

PROMPT = "the cat sat on a mat and the dog ran to the park. the cat sat on a mat and the"


@pytest.fixture(scope="module")
def tiny(hybrid_tiny):
    session = open_session(str(hybrid_tiny), n_ctx=1024, draft_max=4)
    yield session
    session.close()


@pytest.fixture(scope="module")
def smol(smollm2):
    session = open_session(str(smollm2), n_ctx=1024, draft_max=4)
    yield session
    session.close()


def tokens(session, make=None) -> tuple[list[int], str]:
    generation = Generation(session, raw_prompt_tokens(session.model, PROMPT), GenerationSettings(GREEDY, max_tokens=24),
                            make_source=make)
    list(generation)
    return generation.token_ids, generation.source.stats.kind if make else "off"


@pytest.mark.parametrize("which, head, kind", [
    ("tiny", "eagle3_tiny", "eagle3"), ("tiny", "eagle3_smollm2", "mtp"), ("tiny", None, "mtp"),
    ("smol", "eagle3_smollm2", "eagle3"), ("smol", "eagle3_tiny", "lookup"), ("smol", None, "lookup"),
])
def test_auto_drafts_with_the_head_that_fits_else_mtp_else_lookup(request, which, head, kind):
    session = request.getfixturevalue(which)
    path = str(request.getfixturevalue(head)) if head else None
    drafting = Drafting(session)
    try:
        make, stats = drafting.plan(DraftSpec("auto", path), 4, auto_off=False)
        assert stats.kind == kind
        plain, _ = tokens(session)
        drafted, ran = tokens(session, make)
        assert ran == kind and drafted == plain
    finally:
        drafting.close()


def test_a_refused_head_is_not_loaded_again_for_each_request(tiny, eagle3_smollm2):
    drafting = Drafting(tiny)
    try:
        assert drafting.plan(DraftSpec("auto", str(eagle3_smollm2)), 4)[1].kind == "mtp"
        assert eagle3_smollm2 in drafting._refused_heads  # noqa: SLF001
        assert drafting.plan(DraftSpec("auto", str(eagle3_smollm2)), 4)[1].kind == "mtp"
    finally:
        drafting.close()


def policy_state(policy) -> tuple:
    return policy.mode, policy.count, policy.length, list(policy.plain.samples), list(policy.drafting.samples)


def test_the_next_answer_with_the_same_drafter_goes_on_from_where_auto_off_left_it(smol):
    """Whatever this request's timings decided, the next request with that drafter starts from it; after
    forget_speeds (as after a load) it starts afresh; no token changes."""
    drafting = Drafting(smol)
    sampling, rng = GenerationSettings(GREEDY).sampling, np.random.default_rng(0)
    try:
        plain, _ = tokens(smol)
        make, _ = drafting.plan(DraftSpec("lookup"), 4, auto_off=True)
        first = make(smol, sampling, rng).policy
        assert policy_state(first) == ("draft", 0, 2, [], [])  # a fresh policy
        drafting.forget_speeds()
        generation = Generation(smol, raw_prompt_tokens(smol.model, PROMPT), GenerationSettings(GREEDY, max_tokens=24),
                                make_source=drafting.plan(DraftSpec("lookup"), 4, auto_off=True)[0])
        list(generation)
        assert generation.token_ids == plain
        ended = generation.source.policy
        assert ended.plain.samples or ended.drafting.samples  # it measured something
        following = drafting.plan(DraftSpec("lookup"), 4, auto_off=True)[0](smol, sampling, rng).policy
        assert policy_state(following) == policy_state(ended) and following.ever_off == ended.off
        drafting.forget_speeds()
        afresh = drafting.plan(DraftSpec("lookup"), 4, auto_off=True)[0](smol, sampling, rng).policy
        assert policy_state(afresh) == ("draft", 0, 2, [], [])
    finally:
        drafting.close()
