"""The one check of a GGUF file's extent (``model_store.gguf_meta``, issue 50): what the list of tensors
declares is held against the file's real size before anything maps or reads the file."""

from __future__ import annotations

import os
import struct

import gguf
import numpy as np
import psutil
import pytest

from model_store.gguf_meta import MAX_ALIGNMENT, TRAILING_SLACK, GgufDamaged, GgufTruncated, read_metadata


@pytest.fixture
def model(tmp_path):
    """A small GGUF whose data section ends where the file does (alignment 64)."""
    path = tmp_path / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    writer.add_tensor("token_embd.weight", np.zeros((32, 16), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(16, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def patch(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def type_field(path, name: bytes = b"token_embd.weight") -> int:
    """Where a tensor's type sits in the list of tensors (after its name, n_dims and dimensions)."""
    data = path.read_bytes()
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", data, at)[0]
    return at + 4 + 8 * n_dims


def test_a_file_that_ends_where_its_data_does_is_read(model):
    assert read_metadata(model)["general.alignment"] == 64


def test_trailing_bytes_are_allowed_up_to_the_slack_and_refused_past_it(model):
    size = model.stat().st_size
    os.truncate(model, size + TRAILING_SLACK)
    read_metadata(model)
    os.truncate(model, size + TRAILING_SLACK + 1)
    with pytest.raises(GgufDamaged) as refused:
        read_metadata(model)
    assert f"its tensors' data ends at byte {size}" in str(refused.value)
    assert "goes on for 1.0 MiB more" in str(refused.value) and "choose another file" in str(refused.value)


def test_a_terabyte_of_holes_is_refused_without_reading_them(model):
    os.truncate(model, model.stat().st_size + (1 << 40))
    before = psutil.Process().memory_info().rss
    with pytest.raises(GgufDamaged, match="goes on for 1.0 TiB more"):
        read_metadata(model)
    assert psutil.Process().memory_info().rss - before < 64 << 20


def test_a_tensor_past_the_end_of_the_file_is_truncated(model):
    size = model.stat().st_size
    os.truncate(model, size - 30)  # into the last tensor's data (16 floats, 64 bytes)
    with pytest.raises(GgufTruncated) as refused:
        read_metadata(model)
    assert "tensor 'output_norm.weight' ends at byte" in str(refused.value)
    assert f"the file has only {size - 30} bytes" in str(refused.value)


@pytest.mark.parametrize("alignment", [3, 0, MAX_ALIGNMENT * 2])
def test_an_alignment_llama_cpp_would_not_take_or_that_puts_holes_before_the_data_is_refused(model, alignment):
    data = model.read_bytes()
    key = b"general.alignment"
    patch(model, data.index(key) + len(key) + 4, struct.pack("<I", alignment))
    with pytest.raises(GgufDamaged, match=f"general.alignment is {alignment}, not a power of two"):
        read_metadata(model)


def test_a_tensor_type_ggml_does_not_have_is_refused(model):
    patch(model, type_field(model), struct.pack("<I", 99))
    with pytest.raises(GgufDamaged, match="tensor 'token_embd.weight' uses data type 99, which this Hearth does not"):
        read_metadata(model)
