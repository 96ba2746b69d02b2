"""EAGLE-3 drafting on a transformer target: the embedded SmolLM2-135M (``llama``, 30 layers, n_embd
576) with the fixture head ``eagle3-smollm2`` (random weights, reading layers 2, 15 and 27, borrowing
SmolLM2's embeddings and tied output head). Its guesses are nearly always wrong, so almost every
round is rolled back, here by trimming the KV cache, and no token may change. The same through the
real command line is in ``tests/app/test_eagle3_cli.py``."""

import numpy as np
import pytest

from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.protocol.draft_choice import DraftRefused, parse_draft_spec
from engine.speculative.drafting import Drafting
from engine.speculative.eagle3 import Eagle3Drafter
from engine.speculative.token_sources import SpeculativeSource
from tests.helpers.eagle3_acceptance import FullChains

WORDS = "the cat sat on a mat and the dog ran to the park while birds sang over the river".split()
SHORT = "the river ran past the old mill and the birds sang over the park"
LONG = " ".join(np.random.default_rng(3).choice(WORDS, size=600))  # about 620 tokens


@pytest.fixture(scope="module")
def smol(smollm2):
    session = open_session(str(smollm2), n_ctx=1024, draft_max=4)
    yield session
    session.close()



def run(session, prompt_tokens, make_source=None):
    generation = Generation(session, prompt_tokens, GenerationSettings(GREEDY, max_tokens=16), make_source=make_source)
    list(generation)
    return generation


def test_greedy_output_with_full_eagle3_chains_on_smollm2_is_plain_decoding(smol, eagle3_smollm2):
    # p_min 0: the head chains all 4 guesses, however unsure it is
    proposer = Eagle3Drafter(eagle3_smollm2, smol, sampling=GREEDY, rng=np.random.default_rng(0), p_min=0.0)

    def make(session, sampling, rng):
        proposer.configure(sampling, rng)
        return SpeculativeSource(session, sampling, rng, proposer, FullChains(4))

    try:
        for prompt in (SHORT, LONG):
            tokens = raw_prompt_tokens(smol.model, prompt)
            plain = run(smol, tokens)
            drafted = run(smol, tokens, make)
            assert drafted.token_ids == plain.token_ids and len(plain.token_ids) == 16, prompt[:40]
            stats = drafted.source.stats
            assert stats.kind == "eagle3" and stats.rounds >= 8 and stats.drafted >= 4 * stats.rounds, stats
            assert stats.rollbacks > 0, stats
        assert len(tokens) > 512  # the long prompt's context
    finally:
        proposer.close()
    assert smol.context.after_decode is None, "the head stops following the target after its request"


def test_the_head_made_for_hybrid_tiny_is_refused_for_smollm2_in_one_line(smol, eagle3_tiny):
    with pytest.raises(DraftRefused) as refused:
        Drafting(smol).plan(parse_draft_spec(f"eagle3:{eagle3_tiny}"), 4)
    message = str(refused.value)
    assert "\n" not in message, message
    assert message.startswith(f"{eagle3_tiny.name} was made for a target of hidden size 64, but ") and \
        message.endswith(" has 576; use an EAGLE-3 head made for this model, or another drafting choice"), message
