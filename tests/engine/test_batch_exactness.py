"""The property exact drafting rests on: a batch of tokens gives bit-identical logits to the same
tokens decoded one at a time (this needs llama.cpp built without llamafile's sgemm)."""

import numpy as np
import pytest

from engine.backends.llama_cpp import build_info
from engine.prompts import raw_prompt_tokens
from engine.session import open_session


def test_llama_cpp_was_built_without_llamafile_sgemm():
    info = build_info()
    assert "LLAMAFILE = 1" not in info, f"rebuild with installers/setup_dev.sh ({info})"


@pytest.mark.parametrize("model_fixture", ["hybrid_tiny", "smollm2"])
def test_batch_rows_equal_single_token_logits(request, model_fixture):
    session = open_session(str(request.getfixturevalue(model_fixture)), n_ctx=512, draft_max=4)
    try:
        prompt = raw_prompt_tokens(session.model, "the lighthouse keeper wrote in the log")
        session.feed(prompt)
        extra = [101, 202, 303, 404]
        session.context.decode(extra, session.n_past, all_logits=True)
        batch = [session.context.logits(i).copy() for i in range(len(extra))]
        session.reset()
        session.feed(prompt)
        for i, token in enumerate(extra):
            session.feed([token])
            np.testing.assert_array_equal(session.last_logits(), batch[i])
    finally:
        session.close()
