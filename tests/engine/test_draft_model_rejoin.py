"""A draft model that was idle while auto-off had drafting switched off rejoins from the last
``REJOIN_TOKENS`` of the history, not from everything it missed; its guesses are those of a draft
model that read only those tokens, and the target's answer stays plain decoding's."""

import numpy as np
import pytest

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.speculative.draft_model import REJOIN_TOKENS, DraftModel
from engine.speculative.drafting import Drafting
from engine.protocol.draft_choice import parse_draft_spec

TEXT = ("the keeper climbed the tower at dusk and lit the lamp, then wrote the weather in the log: "
        "wind from the west, rain by midnight, two ships passed the channel before the tide turned. ") * 3


@pytest.fixture(scope="module")
def tiny(hybrid_tiny):
    session = open_session(str(hybrid_tiny), n_ctx=1024, draft_max=4)
    yield session
    session.close()


def _draft_model(tiny, path) -> DraftModel:
    return DraftModel(path, tiny.model, n_ctx=1024, n_threads=1, sampling=GREEDY, rng=np.random.default_rng(0))


def test_after_idling_it_reads_only_the_recent_history_and_guesses_as_if_it_had_read_only_that(tiny, test_models):
    history = raw_prompt_tokens(tiny.model, TEXT)
    assert len(history) > 2 * REJOIN_TOKENS
    rejoined, fresh = _draft_model(tiny, test_models["hybrid-draft"]), _draft_model(tiny, test_models["hybrid-draft"])
    try:
        rejoined.prepare(history[:10])
        rejoined.set_active(False)  # drafting off while the answer went on
        rejoined.prepare(history)
        assert (rejoined.start, len(rejoined.tokens)) == (len(history) - REJOIN_TOKENS, REJOIN_TOKENS)
        fresh.prepare(history[-REJOIN_TOKENS:])
        ask = history + [history[5]]
        assert rejoined.propose(ask, 4).tokens == fresh.propose(history[-REJOIN_TOKENS:] + [history[5]], 4).tokens

        rejoined.prepare(history + history[:7])  # drafting kept on: it reads what is new, from where it is
        assert (rejoined.start, len(rejoined.tokens)) == (len(history) - REJOIN_TOKENS, REJOIN_TOKENS + 7)
        rejoined.prepare(history[:12])  # another conversation: it starts over from its first token
        assert (rejoined.start, rejoined.tokens) == (0, history[:12])
    finally:
        rejoined.close()
        fresh.close()


def test_without_idling_it_reads_everything_it_has_not_read(tiny, test_models):
    history = raw_prompt_tokens(tiny.model, TEXT)
    model = _draft_model(tiny, test_models["hybrid-draft"])
    try:
        model.prepare(history[:10])
        model.prepare(history)
        assert (model.start, model.tokens) == (0, history)
    finally:
        model.close()


def test_an_answer_drafted_after_the_draft_model_idled_is_plain_decodings(tiny, test_models):
    drafting = Drafting(tiny)
    make, _ = drafting.plan(parse_draft_spec(f"model:{test_models['hybrid-draft']}"), 4, auto_off=False)
    settings = GenerationSettings(GREEDY, max_tokens=60)
    prompt = raw_prompt_tokens(tiny.model, TEXT)
    try:
        first = Generation(tiny, prompt[:20], settings, make_source=make)
        list(first)
        first.source.proposer.set_active(False)  # as auto-off leaves it
        drafted = Generation(tiny, prompt, settings, make_source=make)
        list(drafted)
        assert drafted.source.proposer.start > 0, "it rejoined from the recent history"
        assert drafted.source.stats.drafted > 0
        plain = Generation(tiny, prompt, settings)
        list(plain)
        assert drafted.token_ids == plain.token_ids
    finally:
        drafting.close()
