"""While auto-off has prompt lookup switched off, its guesses are still made (they are free) and scored
against what plain decoding then writes (``SpeculativeSource._score_guess``); the policy hears how many
tokens of each guess were right (``DraftPolicy.record_guess``). Nothing is drafted while off, and the
answer is plain decoding's."""

from __future__ import annotations

import pytest

from engine.templates.chat_template import ChatMessage
from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import chat_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import open_session
from engine.speculative.policy import DraftPolicy
from engine.speculative.prompt_lookup import PromptLookup
from engine.speculative.token_sources import SpeculativeSource
from tests.process.test_document_lookup import DOCUMENT, QUESTION


class OffListening(DraftPolicy):
    """Switched off for good; keeps every guess score it is told."""

    def __init__(self) -> None:
        super().__init__(4)
        self.mode = "off"
        self.heard: list[int] = []

    def record_guess(self, n_right: int) -> None:
        self.heard.append(n_right)


@pytest.fixture(scope="module")
def smol(smollm2):
    session = open_session(str(smollm2), n_ctx=2048, draft_max=4)
    yield session
    session.close()


def answer(session, make=None) -> Generation:
    prompt = chat_prompt_tokens(session.model, [ChatMessage("user", f"{DOCUMENT}\n\n{QUESTION}")])
    run = Generation(session, prompt, GenerationSettings(GREEDY, max_tokens=48), make_source=make)
    list(run)
    return run


def test_guesses_are_scored_against_the_answer_while_off(smol):
    plain = answer(smol)
    policy = OffListening()
    run = answer(smol, lambda session, sampling, rng: SpeculativeSource(session, sampling, rng, PromptLookup(), policy))
    assert run.token_ids == plain.token_ids
    assert run.source.stats.drafted == 0
    text = b"".join(smol.model.piece(t) for t in run.token_ids).decode()
    assert "built in 1832 to guide ships" in text, text
    # a quote: the document's next tokens are right, four at a time (scored every 1..5 plain steps)
    assert len(policy.heard) >= 8 and all(0 <= n <= 4 for n in policy.heard)
    assert sum(n == 4 for n in policy.heard) >= len(policy.heard) // 2, policy.heard
