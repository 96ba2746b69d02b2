"""The property exact drafting rests on: a batch of tokens gives bit-identical logits to the same
tokens decoded one at a time, at every verify batch size (2 to 15 rows). llama.cpp is built with
llamafile's sgemm for prompt reading, patched to take only batches of 16 rows or more
(installers/llama_build.py), so the sizes just under that are checked here too."""

import numpy as np
import pytest

from engine.backends import row_kernels
from engine.backends.llama_cpp import build_info
from engine.templates.prompts import raw_prompt_tokens
from engine.models.session import open_session


def test_llama_cpp_was_built_with_llamafile_sgemm_for_prompt_reading():
    info = build_info()
    assert "LLAMAFILE = 1" in info, f"rebuild with installers/setup_dev.sh ({info})"


@pytest.mark.parametrize("rows", [2, 4, 15])
@pytest.mark.parametrize("model_fixture", ["hybrid_tiny", "smollm2"])
def test_batch_rows_equal_single_token_logits(request, model_fixture, rows):
    session = open_session(str(request.getfixturevalue(model_fixture)), n_ctx=512, draft_max=rows)
    try:
        prompt = raw_prompt_tokens(session.model, "the lighthouse keeper wrote in the log")
        session.feed(prompt)
        extra = [101 * (i + 1) % session.model.n_vocab for i in range(rows)]
        session.context.decode(extra, session.n_past, all_logits=True)
        batch = [session.context.logits(i).copy() for i in range(len(extra))]
        session.reset()
        session.feed(prompt)
        for i, token in enumerate(extra):
            session.feed([token])
            np.testing.assert_array_equal(session.last_logits(), batch[i])
    finally:
        session.close()


@pytest.mark.parametrize("rows", [4, 15])
def test_a_short_prompt_read_takes_the_batched_kernels_and_a_verify_batch_after_it_stays_exact(hybrid_tiny, rows):
    """A prompt read shorter than EXACT_ROWS may round as a batch does (engine.backends.row_kernels):
    its rows differ from single-token decodes, which shows the batched kernels ran (on this F32 model
    they round otherwise; Q8_0's integer dot products happen to agree); the switch is back for the
    verify batch that follows."""
    session = open_session(str(hybrid_tiny), n_ctx=512, draft_max=rows)
    try:
        assert not row_kernels.short_reads_exact(), "this build exports hearth_exact_rows"
        prompt = raw_prompt_tokens(session.model, "the lighthouse keeper wrote in the log")
        extra = [101 * (i + 1) % session.model.n_vocab for i in range(rows)]
        session.feed(prompt)
        session.context.decode(extra, session.n_past, all_logits=True, prompt=True)
        read = [session.context.logits(i).copy() for i in range(rows)]
        session.reset()
        session.feed(prompt)
        session.context.decode(extra, session.n_past, all_logits=True)
        verified = [session.context.logits(i).copy() for i in range(rows)]
        session.reset()
        session.feed(prompt)
        single = []
        for token in extra:
            session.feed([token])
            single.append(session.last_logits().copy())
        assert all(np.array_equal(v, s) for v, s in zip(verified, single))
        assert not all(np.array_equal(r, s) for r, s in zip(read[1:], single[1:]))
        np.testing.assert_allclose(read[-1], single[-1], rtol=1e-3, atol=1e-3)  # the same numbers, rounded otherwise
    finally:
        session.close()
