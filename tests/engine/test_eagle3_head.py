"""The EAGLE-3 head wrapper on real llama.cpp: hybrid-tiny as the target, the fixture head (random
weights) reading its layers 1-3. What a head computes is checked against the files' own tensors
where that is simple: layer 0's input is the token's embedding, and the encoder is ``fc``."""

from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest

from engine.backends.base import ContextSettings
from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel
from engine.backends.llama_eagle3 import Eagle3Head, Eagle3Incompatible, llama_get_ctx_other
from tests.fixtures.bpe_vocab import build_vocab
from tests.fixtures.eagle3_head import write_eagle3
from tests.fixtures.make_models import EAGLE3_TINY, HYBRID_TINY, TINY_VOCAB

PROMPT_A = "the cat sat on a mat and the dog ran"
PROMPT_B = "birds sang over the river in the park"


@pytest.fixture(scope="module")
def target(hybrid_tiny):
    model = LlamaModel(hybrid_tiny)
    context = LlamaContext(model, ContextSettings(n_ctx=512, n_batch=64, n_ubatch=64, n_threads=2))
    yield context
    context.close()
    model.close()


@pytest.fixture
def head(target, eagle3_tiny):
    head = Eagle3Head(eagle3_tiny, target)
    head.features.capture(True)
    yield head
    head.close()


def head_file(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "head.gguf"
    write_eagle3(path, replace(EAGLE3_TINY, **changes), build_vocab(TINY_VOCAB), "test-head")
    return path


def tokens(target: LlamaContext, text: str) -> list[int]:
    return target.model.tokenize(text, add_special=False, parse_special=False)


def features_of(head: Eagle3Head, text: str) -> np.ndarray:
    ids = tokens(head.target, text)
    head.target.clear()
    head.target.decode(ids, 0)
    return head.features.read(len(ids))


def tensor(path: Path, name: str) -> np.ndarray:
    found = [t for t in gguf.GGUFReader(path).tensors if t.name == name]
    return np.array(found[0].data, dtype=np.float32)


def test_the_head_reports_the_layers_its_file_declares_and_reads_through_the_target(head, target):
    assert head.layer_ids == EAGLE3_TINY.target_layers == (1, 2, 3)
    other = llama_get_ctx_other(head.handle)
    assert other is not None and other == target.handle  # borrows the target's embeddings and head


def test_features_have_three_layers_per_row_are_deterministic_and_follow_the_prompt(head, target):
    a = features_of(head, PROMPT_A)
    assert a.shape == (len(tokens(target, PROMPT_A)), 3 * HYBRID_TINY.n_embd)
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(features_of(head, PROMPT_A), a)
    b = features_of(head, PROMPT_B)
    n = min(len(a), len(b))
    assert not np.allclose(a[:n], b[:n])
    blocks = np.split(a, 3, axis=1)  # three different layers, not one copied three times
    assert not np.allclose(blocks[0], blocks[1]) and not np.allclose(blocks[1], blocks[2])


def test_a_captured_layer_is_that_layers_input(target, tmp_path, hybrid_tiny):
    """Layer 0's input is the token's embedding row; the head's id order is the feature order."""
    head = Eagle3Head(head_file(tmp_path, target_layers=(2, 3, 0)), target)
    try:
        head.features.capture(True)
        ids = tokens(target, PROMPT_A)
        features = features_of(head, PROMPT_A)
        n = HYBRID_TINY.n_embd
        embeddings = tensor(hybrid_tiny, "token_embd.weight").reshape(-1, n)
        np.testing.assert_array_equal(features[:, 2 * n:], embeddings[ids])
        assert not np.allclose(features[:, :n], embeddings[ids])
    finally:
        head.close()


def test_encode_fuses_the_features_through_fc(head, eagle3_tiny):
    features = features_of(head, PROMPT_A)
    g = head.encode(features)
    fc = tensor(eagle3_tiny, "fc.weight").reshape(EAGLE3_TINY.n_embd, -1)
    assert g.shape == (len(features), EAGLE3_TINY.n_embd)
    np.testing.assert_allclose(g, features @ fc.T, rtol=1e-4, atol=1e-4)
    head.decode([1, 2, 3], g[:3], 0)  # the encoder keeps no memory: rows in the cache change nothing
    np.testing.assert_array_equal(head.encode(features), g)


def test_the_heads_logits_are_finite_over_the_targets_vocabulary_and_repeatable(head, target):
    ids = tokens(target, PROMPT_A)
    g = head.encode(features_of(head, PROMPT_A))
    rows = ids[1:] + [ids[-1]]  # the row at position p pairs g[p] with the token at p + 1

    def run():
        head.clear()
        head.decode(rows, g, 0, all_logits=True)
        return [head.logits(i).copy() for i in range(len(rows))], head.next_g(-1)

    logits, next_g = run()
    assert all(row.shape == (target.model.n_vocab,) and np.isfinite(row).all() for row in logits)
    assert next_g.shape == (EAGLE3_TINY.n_embd,) and np.isfinite(next_g).all()
    assert len({int(row.argmax()) for row in logits}) > 1  # the guesses follow the input rows
    again, again_g = run()
    for first, second in zip(logits, again):
        np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(next_g, again_g)


@pytest.mark.parametrize(("changes", "message"), [
    ({"target_hidden_size": 96}, "target of hidden size 96, but hybrid-tiny.gguf has 64"),
    ({"n_embd": 32, "target_hidden_size": 64}, "has hidden size 32"),
    ({"target_layers": (1, 2, 9)}, "reads layers [1, 2, 9]"),
], ids=["declared-hidden-size", "own-hidden-size", "layer-out-of-range"])
def test_a_head_for_another_target_is_refused_and_the_target_still_works(target, tmp_path, changes, message):
    with pytest.raises(Eagle3Incompatible) as refused:
        Eagle3Head(head_file(tmp_path, **changes), target)
    assert message in str(refused.value)
    target.clear()
    target.decode(tokens(target, PROMPT_A), 0)
    assert np.isfinite(target.logits()).all()


def test_a_model_that_is_not_an_eagle3_head_is_refused(target, hybrid_tiny):
    with pytest.raises(Eagle3Incompatible, match="not an EAGLE-3 head"):
        Eagle3Head(hybrid_tiny, target)
