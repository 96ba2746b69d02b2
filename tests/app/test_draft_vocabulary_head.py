"""An EAGLE-3 head with a draft vocabulary of its own (``d2t``: its output rows' target token ids, an I64
tensor, as the built-in model's trained head has) drafts, and the answer is plain decoding's. llama.cpp
writes each output row to the id ``d2t`` names without a bounds check, so a head whose ids leave the
vocabulary, or whose output matrix does not match them, is refused in one line before it loads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fixtures.eagle3_head import eagle3_hparams, eagle3_tensors
from tests.fixtures.gguf_files import write_gguf
from tests.fixtures.make_models import EAGLE3_TINY, _tiny_vocab
from tests.helpers.cli import error_line, hearth

DRAFT_VOCAB = 64


def write_head(folder, name: str, ids: np.ndarray, rows: int | None = None):
    vocab = _tiny_vocab()
    tensors = eagle3_tensors(EAGLE3_TINY, vocab.head_row_scale())
    rng = np.random.default_rng(5)
    tensors["output.weight"] = rng.standard_normal((rows or len(ids), EAGLE3_TINY.n_embd)).astype(np.float32)
    tensors["d2t"] = ids.astype(np.int64)
    path = folder / f"{name}.gguf"
    write_gguf(path, "eagle3", eagle3_hparams(EAGLE3_TINY), tensors, vocab, name, "")
    return path, len(vocab.tokens)


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    folder = tmp_path_factory.mktemp("d2t")
    good, n_vocab = write_head(folder, "head-d2t", np.arange(0, 2 * DRAFT_VOCAB, 2))
    outside, _ = write_head(folder, "head-d2t-outside", np.append(np.arange(DRAFT_VOCAB - 1), n_vocab + 7))
    mismatched, _ = write_head(folder, "head-d2t-rows", np.arange(DRAFT_VOCAB), rows=DRAFT_VOCAB + 3)
    return {"good": good, "outside": outside, "mismatched": mismatched}


def generate(model, head=None):
    args = ["generate", "--model", str(model), "--temperature", "0", "--max-tokens", "24", "--json"]
    if head is not None:
        args += ["--draft", f"eagle3:{head}"]
    return hearth(*args, "the cat sat on the mat and the dog")


def test_a_head_with_its_own_draft_vocabulary_drafts_and_changes_no_token(hearth_home, hybrid_tiny, heads):
    plain, drafted = generate(hybrid_tiny), generate(hybrid_tiny, heads["good"])
    assert plain.returncode == 0 and drafted.returncode == 0, drafted.stderr
    plain_out, drafted_out = json.loads(plain.stdout), json.loads(drafted.stdout)
    assert drafted_out["draft"]["kind"] == "eagle3" and drafted_out["draft"]["drafted"] > 0, drafted_out["draft"]
    assert drafted_out["token_ids"] == plain_out["token_ids"]


@pytest.mark.parametrize("which, words", [("outside", "outside its vocabulary"),
                                          ("mismatched", "one row per token")])
def test_a_head_whose_draft_vocabulary_does_not_fit_is_refused_in_one_line(hearth_home, hybrid_tiny, heads, which,
                                                                         words):
    line = error_line(generate(hybrid_tiny, heads[which]))
    assert heads[which].name in line and words in line, line
    line = error_line(hearth("models", "import", str(heads[which])))
    assert words in line, line
