"""A prompt's chunks before its last FULL_ROWS_TAIL rows are pruned: past the last layer's attention
the model computes only their output row (issue 35: Qwen3.5's graph here otherwise ran its last
FFN for every row of every chunk). The state they leave, and everything read from the read's last
chunk, must be what an unpruned read gives; a drafting head forgets the rows it did not get.
Real llama.cpp on the tiny hybrid (Qwen3.5's graph) and the embedded SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest
from llama_cpp import llama_cpp_ext

from engine.decoding.generation import prefill
from engine.templates.prompts import raw_prompt_tokens
from engine.decoding.sampling import GREEDY
from engine.models.session import FULL_ROWS_TAIL, open_session

TEXT = "The river ran past the mill, and the miller counted sacks of grain by lamplight. "


def never() -> bool:
    return False


def no_progress(done: int, total: int) -> None:
    pass


def greedy_steps(session, n: int) -> list[int]:
    """The next ``n`` greedy tokens, one decode each."""
    out = []
    for _ in range(n):
        out.append(int(np.argmax(session.last_logits())))
        session.feed(out[-1:])
    return out


@pytest.mark.parametrize("name", ["hybrid_tiny", "smollm2"])
def test_a_pruned_read_leaves_the_state_and_answer_of_an_unpruned_one(request, name):
    session = open_session(str(request.getfixturevalue(name)), n_ctx=4096)
    try:
        tokens = raw_prompt_tokens(session.model, TEXT * 110)[:1700]
        assert len(tokens) == 1700  # chunks 0-512 and 512-1024 end before the tail (1188): pruned
        results = []
        for pruned in (True, False):
            session.reset()
            if pruned:
                assert prefill(session, tokens, reset=False, on_progress=no_progress, cancelled=never)
            else:
                session.feed(tokens)  # never pruned
            state, logits = session.context.state_get(), session.last_logits().copy()
            results.append((state, logits, greedy_steps(session, 12)))
    finally:
        session.close()
    (state1, logits1, answer1), (state2, logits2, answer2) = results
    assert state1 == state2
    assert np.array_equal(logits1, logits2)
    assert answer1 == answer2 and len(answer1) == 12


def test_a_pruned_chunk_outputs_only_its_last_row(hybrid_tiny):
    """With every row's hidden state asked for (an MTP head follows), a pruned chunk gives only its
    output row's: the last layer really skipped the others."""
    session = open_session(str(hybrid_tiny), n_ctx=2048)
    try:
        context = session.context
        context.output_hidden_rows(True)
        tokens = raw_prompt_tokens(session.model, TEXT * 40)[:300]
        for prune, first_row_out in ((False, True), (True, False)):
            session.reset()
            session.feed(tokens, prune=prune)
            assert context.pruned is prune
            assert bool(llama_cpp_ext.llama_get_embeddings_nextn_ith(context.handle, 0)) is first_row_out
            assert llama_cpp_ext.llama_get_embeddings_nextn_ith(context.handle, len(tokens) - 1)
    finally:
        session.close()


def test_a_head_follows_only_the_unpruned_tail(hybrid_tiny):
    """A 1,024-token read: its first chunk is pruned, so the second chunk's first token has no row
    before it to pair with, and the head's cache starts one past the tail's start."""
    from engine.decoding.sampling import make_rng
    from engine.speculative.mtp import MtpDrafter

    session = open_session(str(hybrid_tiny), n_ctx=4096, draft_max=4)
    try:
        head = MtpDrafter(session, sampling=GREEDY, rng=make_rng(0))
        tokens = raw_prompt_tokens(session.model, TEXT * 80)[:1025]
        head.attach()
        session.reset()
        assert prefill(session, tokens[:1024], reset=False, on_progress=no_progress, cancelled=never)
        head.propose(tokens, 2)
        assert head.head.pos_min() == 1024 - FULL_ROWS_TAIL + 1
        assert head.head.pos_max() == 1023
        head.close()
    finally:
        session.close()


@pytest.mark.parametrize("length, logits_read, pruned", [(1030, True, [True, True, False]),
                                                    (1100, True, [True, True, False]),
                                                    (1100, False, [True, True, True])])
@pytest.mark.parametrize("name", ["hybrid_tiny", "smollm2"])
def test_with_no_head_following_only_a_long_last_chunk_whose_logits_are_read_is_read_whole(
        request, name, length, logits_read, pruned):
    """No head follows: the chunks in the tail are pruned too, and so is a last chunk whose logits
    nobody reads (a question's part, the answer's cue read after it); a last chunk whose logits are
    read gives the answer's first token unpruned, short ones too (a short prompt read takes the
    batched kernels, engine.backends.row_kernels, so a pruned row would round otherwise). A
    chunk whose logits nobody reads computes no output row at all. The state, the logits and the
    answer are an unpruned read's."""
    session = open_session(str(request.getfixturevalue(name)), n_ctx=4096)
    try:
        tokens = raw_prompt_tokens(session.model, TEXT * 70)[:length + 3]
        question, cue = tokens[:length], tokens[length:]
        assert len(question) == length and len(cue) == 3 and not session.rows_followed
        flags: list[bool] = []
        kept: list[bool] = []
        feed = session.feed

        def recording_feed(chunk, **kwargs):
            flags.append(kwargs.get("prune", False))
            kept.append(kwargs.get("logits", True))
            feed(chunk, **kwargs)

        session.reset()
        session.feed = recording_feed
        assert prefill(session, question, reset=False, on_progress=no_progress, cancelled=never,
                       logits_read=logits_read)
        state = session.context.state_get()
        if not logits_read:  # the cue follows, as generation reads it: its logits give the answer
            with pytest.raises(RuntimeError, match="kept no logits"):
                session.last_logits()  # no output row was computed: the question's part moved the state only
            assert prefill(session, cue, reset=False, on_progress=no_progress, cancelled=never)
        session.feed = feed
        assert flags == pruned + ([] if logits_read else [False])  # the cue gives the answer's logits: whole
        # only the read's last chunk keeps its last row's logits, and only when they are read
        assert kept == [False] * (len(pruned) - 1) + ([True] if logits_read else [False, True])
        read = (state, session.last_logits().copy(), greedy_steps(session, 8))
        session.reset()
        session.feed(question)  # never pruned
        state = session.context.state_get()
        if not logits_read:
            session.feed(cue)
        whole = (state, session.last_logits().copy(), greedy_steps(session, 8))
    finally:
        session.close()
    assert read[0] == whole[0]
    assert np.array_equal(read[1], whole[1])
    assert read[2] == whole[2]
