"""Going back to an earlier point of the live sequence (a question's state kept in memory, its KV
cells still in the context) is exactly that point: what is read next gives the same logits and the
same state, byte for byte, as reading it right after that point."""

import numpy as np
import pytest

from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.templates.prompts import raw_prompt_tokens
from engine.models.session import open_session

QUESTION = "The quick brown fox jumps over the lazy dog. Then what?"
ANSWER = [40, 41, 42, 43, 44, 45, 46]
NEXT = "And after that, where did it go?"


@pytest.fixture(params=[("hybrid_tiny", 0), ("hybrid_tiny", 4), ("smollm2", 0)],
                ids=["hybrid", "hybrid-rollback-planes", "transformer"])
def session(request):
    name, draft_max = request.param
    session = open_session(str(request.getfixturevalue(name)), n_ctx=512, draft_max=draft_max)
    yield session
    session.close()


def _read_after_question(session, question, following):
    session.reset()
    session.feed(question)
    session.feed(following)
    return session.last_logits().copy(), session.context.state_get(0)


def test_reading_on_from_a_rewound_question_equals_reading_on_right_after_it(session):
    model = session.model
    question, following = raw_prompt_tokens(model, QUESTION), model.tokenize(NEXT, add_special=False,
                                                                             parse_special=False)
    expected_logits, expected_state = _read_after_question(session, question, following)

    session.reset()
    session.feed(question)
    held = session.context.state_get(0, STATE_PARTIAL_ONLY) if session.has_recurrent_state else None
    session.feed(ANSWER[:3])
    for token in ANSWER[3:]:  # an answer: a batch, then one token at a time
        session.feed([token])
    assert session.rewind(len(question), held)
    assert session.n_past == len(question)
    session.feed(following)
    assert np.array_equal(session.last_logits(), expected_logits)
    assert session.context.state_get(0) == expected_state


def test_a_point_the_sequence_never_reached_is_refused(session):
    session.reset()
    session.feed(raw_prompt_tokens(session.model, QUESTION))
    assert not session.rewind(session.n_past + 1, None)
    assert not session.rewind(0, None)
