"""The repeat penalty on the embedded model: greedy SmolLM2 loops on one stanza; a mild penalty breaks it.

(Issue 31: the built-in model repeated one sentence 15 times.) Greedy, so every run is the same; the
measure is how many of the answer's 8-token runs already occurred earlier in it.
"""

import pytest

from engine.templates.chat_template import ChatMessage
from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import chat_prompt_tokens
from engine.decoding.sampling import GREEDY, SamplingParams
from engine.models.session import open_session

QUESTION = "Write a poem about rain."
TOKENS = 120


def repeated_runs(ids: list[int], n: int = 8) -> int:
    """How many of the n-token runs of ``ids`` occurred earlier in it."""
    seen, repeats = set(), 0
    for i in range(len(ids) - n + 1):
        run = tuple(ids[i:i + n])
        repeats += run in seen
        seen.add(run)
    return repeats


@pytest.fixture(scope="module")
def session(smollm2):
    session = open_session(str(smollm2), n_ctx=1024)
    yield session
    session.close()


def answer(session, sampling: SamplingParams) -> Generation:
    tokens = chat_prompt_tokens(session.model, [ChatMessage("user", QUESTION)])
    generation = Generation(session, tokens, GenerationSettings(sampling, max_tokens=TOKENS))
    list(generation)
    return generation


def test_a_mild_repeat_penalty_stops_the_embedded_model_looping(session):
    plain = answer(session, GREEDY)
    # the loop the issue saw: 57 of the 113 runs repeat on the fast-reading Q8_0 copy, 60+ on the shipped Q4_1
    assert repeated_runs(plain.token_ids) > TOKENS // 3, plain.text
    penalised = answer(session, SamplingParams(temperature=0.0, repeat_penalty=1.1))
    assert repeated_runs(penalised.token_ids) < 5, penalised.text
    assert penalised.token_ids[:4] == plain.token_ids[:4], "it starts the same: only repeats are held back"
