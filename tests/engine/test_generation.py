"""The generation loop on real models: varied output, sampling reproducibility, limits, cancel."""

import pytest

from engine.templates.chat_template import ChatMessage
from engine.decoding.generation import Generation, GenerationSettings
from engine.templates.prompts import chat_prompt_tokens, raw_prompt_tokens
from engine.decoding.sampling import GREEDY, SamplingParams
from engine.models.session import open_session


@pytest.fixture(scope="module")
def tiny_session(hybrid_tiny):
    session = open_session(str(hybrid_tiny), n_ctx=1024)
    yield session
    session.close()


def greedy_ids(session, prompt, n=32):
    run = Generation(session, raw_prompt_tokens(session.model, prompt), GenerationSettings(GREEDY, max_tokens=n))
    list(run)
    return run.token_ids


@pytest.mark.parametrize("name", ["hybrid-tiny", "hybrid-tiny-q8", "hybrid-draft"])
def test_generated_models_give_varied_greedy_output(test_models, name):
    session = open_session(str(test_models[name]), n_ctx=512)
    try:
        ids = greedy_ids(session, "The quick brown fox", 32)
    finally:
        session.close()
    assert len(ids) == 32
    assert len(set(ids)) >= 15, ids


def test_seeded_sampling_is_reproducible(tiny_session):
    tokens = raw_prompt_tokens(tiny_session.model, "Once upon a time")

    def sample(seed):
        run = Generation(tiny_session, tokens, GenerationSettings(SamplingParams(temperature=1.0, seed=seed), 24))
        list(run)
        return run.token_ids

    assert sample(11) == sample(11)
    assert sample(11) != sample(12)


def test_max_tokens_and_timings(tiny_session):
    run = Generation(tiny_session, raw_prompt_tokens(tiny_session.model, "abc"), GenerationSettings(GREEDY, 5))
    deltas = list(run)
    assert run.finish_reason == "length" and len(run.token_ids) == 5
    assert sum(len(d.token_ids) for d in deltas) == 5
    assert "".join(d.text for d in deltas) == run.text
    t = run.timings
    assert t.prompt_n == len(run.prompt_tokens) and t.gen_n == 5
    assert 0 < t.prompt_ms <= t.ttft_ms and t.gen_ms > 0


def test_stop_string_ends_generation_without_showing_it(tiny_session):
    tokens = raw_prompt_tokens(tiny_session.model, "The quick brown fox")
    full = Generation(tiny_session, tokens, GenerationSettings(GREEDY, 32))
    list(full)
    stop = full.text[10:13]
    cut = Generation(tiny_session, tokens, GenerationSettings(GREEDY, 32, stop=(stop,)))
    list(cut)
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.index(stop)]


def test_cancel_stops_within_one_step(tiny_session):
    tokens = raw_prompt_tokens(tiny_session.model, "The quick brown fox")
    seen = []
    run = Generation(tiny_session, tokens, GenerationSettings(GREEDY, 100), cancelled=lambda: len(seen) >= 3)
    for delta in run:
        seen.extend(delta.token_ids)
    assert run.finish_reason == "cancelled" and len(run.token_ids) == 3


def test_cancel_during_prefill_reads_no_further(tiny_session):
    long_prompt = raw_prompt_tokens(tiny_session.model, "word " * 200)
    progress = []
    run = Generation(tiny_session, long_prompt, GenerationSettings(GREEDY, 5),
                     on_progress=lambda done, total: progress.append(done), cancelled=lambda: len(progress) >= 1)
    assert list(run) == []
    assert run.finish_reason == "cancelled" and progress == [tiny_session.n_batch]


def test_chat_prompt_uses_the_models_template(tiny_session):
    tokens = chat_prompt_tokens(tiny_session.model, [ChatMessage("user", "hi")])
    im_start = tiny_session.model.tokenize("<|im_start|>", add_special=False, parse_special=True)
    assert len(im_start) == 1 and tokens.count(im_start[0]) == 2


def test_end_of_generation_token_stops_and_is_not_emitted(smollm2):
    session = open_session(str(smollm2), n_ctx=1024)
    try:
        tokens = chat_prompt_tokens(session.model, [ChatMessage("user", "Say hello.")])
        run = Generation(session, tokens, GenerationSettings(GREEDY, max_tokens=200))
        list(run)
        assert run.finish_reason == "stop" and 0 < len(run.token_ids) < 200
        assert not any(session.model.is_eog(t) for t in run.token_ids)
        assert "<|im_end|>" not in run.text
    finally:
        session.close()
