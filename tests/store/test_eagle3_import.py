"""EAGLE-3 heads in the store: the target a head's metadata declares, the shape a model's metadata
gives (llama.cpp's layer count), which heads fit which models, and heads kept apart from models."""

from __future__ import annotations

import shutil

import pytest

from model_store.db import StoreError
from model_store.eagle3_heads import HeadTarget, HeadUnusable, ModelShape, head_target, model_shape, read_shape
from model_store.gguf_meta import read_metadata
from model_store.installed import ModelLibrary, embedded_model_file


def test_a_heads_metadata_declares_its_target(eagle3_tiny, eagle3_smollm2):
    assert head_target(read_metadata(eagle3_tiny)) == HeadTarget(64, (1, 2, 3))
    assert head_target(read_metadata(eagle3_smollm2)) == HeadTarget(576, (2, 15, 27))


def test_a_models_shape_is_llama_cpps_layer_count(hybrid_tiny):
    """hybrid-tiny has 5 blocks, one of them its MTP layer: llama.cpp counts 4 layers (hearth info's n_layer)."""
    assert read_shape(hybrid_tiny) == ModelShape(64, 4)
    assert read_shape(embedded_model_file()) == ModelShape(576, 30)


def test_a_head_is_no_model_shape(eagle3_tiny, tmp_path):
    assert read_shape(eagle3_tiny) is None
    assert read_shape(tmp_path / "gone.gguf") is None


@pytest.mark.parametrize("shape, fits", [
    (ModelShape(576, 30), True), (ModelShape(576, 27), True),  # layer 27 of 27: the trunk's output
    (ModelShape(576, 26), False), (ModelShape(64, 30), False), (None, False),
])
def test_a_head_fits_a_model_of_its_hidden_size_with_every_layer_it_reads(shape, fits):
    assert HeadTarget(576, (2, 15, 27)).fits(shape) is fits


@pytest.mark.parametrize("change, words", [
    ({"eagle3.target_hidden_size": None}, "target_hidden_size"),
    ({"eagle3.target_layers": [1, 2]}, "target_layers"),
    ({"eagle3.target_layers": [1, -2, 3]}, "target_layers"),
    ({"eagle3.embedding_length": 128}, "cannot borrow"),
])
def test_a_head_that_does_not_say_its_target_is_unusable(eagle3_tiny, change, words):
    meta = {**read_metadata(eagle3_tiny), **change}
    meta = {k: v for k, v in meta.items() if v is not None}
    with pytest.raises(HeadUnusable, match=words):
        head_target(meta)


def test_heads_are_listed_apart_from_models_and_found_by_the_shape_they_fit(db, eagle3_tiny, eagle3_smollm2,
                                                                         hybrid_tiny, tmp_path):
    library = ModelLibrary(db, tmp_path / "models")
    model = library.add(name="hybrid-tiny", path=hybrid_tiny, size_bytes=hybrid_tiny.stat().st_size, source="import")
    older = tmp_path / "older-head.gguf"
    shutil.copy(eagle3_tiny, older)
    heads = [library.add(name=p.stem, path=p, size_bytes=p.stat().st_size, source="import", architecture="eagle3",
                         head=head_target(read_metadata(p))) for p in (older, eagle3_tiny, eagle3_smollm2)]
    assert [m.id for m in library.registered()] == [model.id] == [m.id for m in library.list()]
    assert {m.id for m in library.heads()} == {h.id for h in heads}
    assert library.get(heads[0].id).head == HeadTarget(64, (1, 2, 3))
    fitting = library.heads_for(read_shape(hybrid_tiny))
    assert [m.id for m in fitting] == [heads[1].id, heads[0].id], "the last added first; SmolLM2's head fits not"
    older.unlink()
    assert [m.id for m in library.heads_for(read_shape(hybrid_tiny))] == [heads[1].id], "a vanished head is passed over"
    with pytest.raises(StoreError, match="is an EAGLE-3 head, not a model"):
        library.resolve(heads[2].id)
    library.remove(heads[2].id)
    assert library.heads_for(ModelShape(576, 30)) == []
