"""A head whose weights are stored in a type llama.cpp cannot compute with (F64) loads in llama.cpp and
then kills the process at its first decode. Hearth refuses it before that, in one line: at
``models import`` and at ``--draft eagle3:PATH``; the worker lives on."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fixtures.eagle3_head import eagle3_hparams, eagle3_tensors
from tests.fixtures.gguf_files import write_gguf
from tests.fixtures.make_models import EAGLE3_TINY, _tiny_vocab
from tests.helpers.cli import error_line, hearth


@pytest.fixture(scope="module")
def f64_head(tmp_path_factory):
    vocab = _tiny_vocab()
    tensors = eagle3_tensors(EAGLE3_TINY, vocab.head_row_scale())
    for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight"):
        tensors[name] = tensors[name].astype(np.float64)
    path = tmp_path_factory.mktemp("f64") / "head-f64.gguf"
    write_gguf(path, "eagle3", eagle3_hparams(EAGLE3_TINY), tensors, vocab, "head-f64", "")
    return path


def test_importing_it_is_refused_in_one_line(hearth_home, f64_head):
    line = error_line(hearth("models", "import", str(f64_head)))
    assert "F64" in line and "cannot compute" in line, line


def test_drafting_with_it_is_refused_in_one_line(hearth_home, hybrid_tiny, f64_head):
    result = hearth("generate", "--model", str(hybrid_tiny), "--draft", f"eagle3:{f64_head}", "--temperature", "0",
                    "--max-tokens", "8", "hi")
    line = error_line(result)
    assert "head-f64.gguf" in line and "F64" in line, line
