"""``hearth models import`` of an EAGLE-3 head, through the real command line: the head is registered
with the model it was made for, ``import`` and ``list`` say which installed models it fits (or that it
fits none), and a broken head is refused in one line."""

from __future__ import annotations

import json
import shutil

import gguf
import numpy as np
import pytest

from tests.helpers.cli import error_line, hearth


def ok(*args: str):
    result = hearth(*args)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def listing() -> dict:
    return json.loads(ok("models", "list", "--json").stdout)


def test_a_head_is_imported_as_the_drafter_of_the_models_it_fits(hearth_home, eagle3_smollm2):
    said = ok("models", "import", str(eagle3_smollm2)).stdout.splitlines()
    assert said == ["imported eagle3-smollm2 (EAGLE-3 head, 21.1 MiB); --draft auto drafts with it for default"], said
    found = listing()
    assert found["installed"] == [], "a head is no model to answer with"
    assert [(h["id"], h["target_hidden_size"], h["target_layers"], h["fits"]) for h in found["eagle3_heads"]] == \
        [("eagle3-smollm2", 576, [2, 15, 27], ["default"])]
    text = ok("models", "list").stdout
    assert "EAGLE-3 heads" in text and "eagle3-smollm2" in text and "EAGLE-3 head; fits default" in text, text


def test_a_head_that_fits_no_installed_model_says_so_then_fits_the_model_once_imported(hearth_home, eagle3_tiny,
                                                                                       hybrid_tiny):
    imported = json.loads(ok("models", "import", "--json", str(eagle3_tiny)).stdout)
    assert imported["architecture"] == "eagle3"
    assert imported["eagle3"] == {"target_hidden_size": 64, "target_layers": [1, 2, 3], "fits": []}
    head = listing()["eagle3_heads"][0]
    assert head["fits"] == [] and head["drafts_for"] == "a model of hidden size 64 with at least 3 layers"
    line = ok("models", "list").stdout.splitlines()[-1]
    assert "eagle3-tiny" in line and "fits no installed model (it drafts for a model of hidden size 64" in line, line
    ok("models", "import", str(hybrid_tiny))
    assert listing()["eagle3_heads"][0]["fits"] == ["hybrid-tiny"]


def test_a_head_is_no_model_to_answer_with_and_is_removed_like_one(hearth_home, eagle3_tiny):
    ok("models", "import", str(eagle3_tiny))
    line = error_line(hearth("generate", "--model", "eagle3-tiny", "--max-tokens", "2", "hi"))
    assert "'eagle3-tiny' is an EAGLE-3 head, not a model" in line and "--draft auto" in line, line
    assert "left where it is" in ok("models", "rm", "eagle3-tiny").stdout
    assert listing()["eagle3_heads"] == [] and eagle3_tiny.exists()


def _head_file(path, **keys):
    """A small ``eagle3`` GGUF with an ``fc`` matrix and the metadata keys given (None: left out)."""
    writer = gguf.GGUFWriter(str(path), "eagle3")
    for key, value in keys.items():
        if isinstance(value, list):
            writer.add_array(f"eagle3.{key}", value)
        elif value is not None:
            writer.add_uint32(f"eagle3.{key}", value)
    writer.add_tensor("fc.weight", np.zeros((64, 192), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("case", ["truncated", "no target size", "two layers", "no fc"])
def test_a_broken_head_is_refused_in_one_line_and_registers_nothing(hearth_home, eagle3_tiny, tmp_path, case):
    path = tmp_path / "head.gguf"
    full = {"embedding_length": 64, "target_hidden_size": 64, "target_layers": [1, 2, 3]}
    if case == "truncated":
        shutil.copy(eagle3_tiny, path)
        path.write_bytes(path.read_bytes()[:-4096])
        words = "truncated"
    elif case == "no target size":
        _head_file(path, **{**full, "target_hidden_size": None})
        words = "does not say the hidden size of the model it drafts for"
    elif case == "two layers":
        _head_file(path, **{**full, "target_layers": [1, 2]})
        words = "does not say which 3 layers"
    else:
        writer = gguf.GGUFWriter(str(path), "eagle3")
        writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        words = "no 'fc.weight' tensor, so it is not a complete EAGLE-3 head"
    line = error_line(hearth("models", "import", str(path)))
    assert "cannot import" in line and "head.gguf" in line and words in line, line
    assert listing()["eagle3_heads"] == []
