"""Import validation: real and hand-built GGUF files are accepted; damaged, foreign,
unsupported and absurd ones are refused with a reason a user can act on."""

from __future__ import annotations

import os
import struct

import gguf
import numpy as np
import psutil
import pytest

from model_store.db import StoreError
from model_store.gguf_check import SUPPORTED_ARCHITECTURES, GgufSummary, ImportRefused, check_gguf
from model_store.gguf_meta import read_metadata
from model_store.regular_file import NotRegularFile
from tests.fixtures.make_models import make_models


def write_gguf(path, arch="llama", tensors=None, context_length=128, embedding_length=16,
               name="tiny test model"):
    """A tiny GGUF (a few KB) with the metadata llama-family files carry."""
    if tensors is None:
        rng = np.random.default_rng(0)
        tensors = {
            "token_embd.weight": rng.standard_normal((32, 16), dtype=np.float32),
            "output_norm.weight": np.ones(16, dtype=np.float32),
        }
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(context_length)
    writer.add_embedding_length(embedding_length)
    writer.add_block_count(1)
    for tensor_name, array in tensors.items():
        writer.add_tensor(tensor_name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def refused(path, **kwargs) -> str:
    with pytest.raises(ImportRefused) as info:
        check_gguf(path, **kwargs)
    assert info.value.path == path
    assert str(info.value) == f"cannot import {path}: {info.value.reason}"
    return info.value.reason


@pytest.fixture
def valid(tmp_path):
    return write_gguf(tmp_path / "tiny.gguf")


# --- accepted ------------------------------------------------------------------------------------

def test_hand_built_file_is_accepted_and_described(valid):
    summary = check_gguf(valid)
    assert summary == GgufSummary(
        path=valid, architecture="llama", name="tiny test model", size_bytes=valid.stat().st_size,
        n_tensors=2, context_length=128, parameter_count=32 * 16 + 16,
    )


def test_real_hybrid_model_is_accepted(tmp_path):
    path = make_models(tmp_path, ["hybrid-tiny"])["hybrid-tiny"]
    summary = check_gguf(path)
    assert summary.architecture == "qwen35"
    assert summary.n_tensors > 10
    assert summary.parameter_count > 0


def test_real_transformer_model_is_accepted(smollm2):
    summary = check_gguf(smollm2)
    assert summary.architecture == "llama"
    assert 100e6 < summary.parameter_count < 200e6  # SmolLM2-135M


def test_large_file_is_checked_without_reading_its_weights(tmp_path):
    # A 1 GiB tensor in a sparse file: only the header pages may be read.
    path = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor_info("token_embd.weight", (65536, 4096), np.dtype(np.float32), 65536 * 4096 * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header_end = path.stat().st_size
    data_start = -(-header_end // 32) * 32  # default alignment
    with open(path, "r+b") as f:
        f.truncate(data_start + 65536 * 4096 * 4)
    before = psutil.Process().memory_info().rss
    summary = check_gguf(path)
    assert summary.parameter_count == 65536 * 4096
    assert psutil.Process().memory_info().rss - before < 200 << 20


# --- refused -------------------------------------------------------------------------------------

def test_missing_file_and_folder(tmp_path):
    assert refused(tmp_path / "nope.gguf") == "there is no such file"
    assert refused(tmp_path).startswith("it is a folder, not a model file")


def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    """Opening a FIFO for reading waits for a writer: the check must never open one (issue 32)."""
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    assert refused(fifo).startswith("it is a named pipe (FIFO), not a model file")
    with pytest.raises(NotRegularFile, match="named pipe"):
        read_metadata(fifo)


def test_tiny_file(tmp_path):
    path = tmp_path / "stub.gguf"
    path.write_bytes(b"GGUF")
    assert "only 4 bytes" in refused(path)


def test_wrong_magic(tmp_path, valid):
    data = valid.read_bytes()
    path = tmp_path / "renamed.gguf"
    path.write_bytes(b"GGML" + data[4:])
    assert "not a GGUF model file" in refused(path)
    text = tmp_path / "notes.gguf"
    text.write_text("these are my notes, not a model" * 3)
    assert "this file is not a GGUF model file: it starts with 'thes', not 'GGUF'" in refused(text)
    archive = tmp_path / "model.zip.gguf"
    archive.write_bytes(b"PK\x03\x04" + data[4:])
    assert "it starts with the bytes 50 4b 03 04, not 'GGUF'" in refused(archive)


@pytest.mark.parametrize("version", [1, 4])
def test_unsupported_version(valid, version):
    patch(valid, 4, struct.pack("<I", version))
    reason = refused(valid)
    assert f"GGUF version {version}" in reason and "versions 2 and 3" in reason


def test_truncated_in_the_tensor_data(tmp_path):
    path = write_gguf(tmp_path / "cut.gguf",
                      tensors={"token_embd.weight": np.zeros((64, 64), dtype=np.float32)})
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 100)
    reason = refused(path)
    assert "truncated" in reason and "token_embd.weight" in reason and f"{size - 100} bytes" in reason


def test_truncated_in_the_header(valid):
    with open(valid, "r+b") as f:
        f.truncate(40)
    assert "damaged or truncated" in refused(valid)


def test_unsupported_architecture(tmp_path):
    path = write_gguf(tmp_path / "bert.gguf", arch="bert")
    assert refused(path) == "architecture 'bert' is not supported by this version of Hearth"


def test_supported_set_comes_from_the_caller(valid):
    assert "llama" in SUPPORTED_ARCHITECTURES
    assert "not supported" in refused(valid, supported={"qwen35"})
    assert check_gguf(valid, supported={"llama"}).architecture == "llama"


def test_supported_set_names_real_gguf_architectures():
    assert SUPPORTED_ARCHITECTURES <= set(gguf.MODEL_ARCH_NAMES.values())
    assert {"qwen35", "qwen3", "qwen2", "llama", "lfm2", "nemotron_h", "granitehybrid",
            "gemma3", "phi3"} <= SUPPORTED_ARCHITECTURES


def test_missing_architecture_entry(valid):
    data = valid.read_bytes()
    at = data.index(b"general.architecture")
    patch(valid, at, b"general.architecturX")
    assert "no general.architecture" in refused(valid)


def test_no_tensors(tmp_path):
    path = write_gguf(tmp_path / "vocab-only.gguf", tensors={})
    assert "contains no tensors" in refused(path)


def test_no_token_embedding(tmp_path):
    path = write_gguf(tmp_path / "adapter.gguf",
                      tensors={"blk.0.attn_q.weight": np.zeros((16, 16), dtype=np.float32)})
    assert "no 'token_embd.weight' tensor" in refused(path)


@pytest.mark.parametrize("dim", [0, 1 << 33])
def test_absurd_tensor_dimension(valid, dim):
    data = valid.read_bytes()
    name = b"token_embd.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    assert struct.unpack_from("<I", data, at)[0] == 2  # n_dims, then the dims
    patch(valid, at + 4, struct.pack("<Q", dim))
    assert f"impossible dimension {dim}" in refused(valid)


@pytest.mark.parametrize("field, value", [
    ("context_length", 1 << 30), ("embedding_length", 0), ("embedding_length", 1 << 20),
])
def test_absurd_model_numbers(tmp_path, field, value):
    kwargs = {"context_length": 128, "embedding_length": 16, field: value}
    path = write_gguf(tmp_path / "absurd.gguf", **kwargs)
    assert f"llama.{field} is {value}, which no real model has" in refused(path)


def test_absurd_tensor_count(valid):
    patch(valid, 8, struct.pack("<Q", 10**6))
    assert "claims 1000000 tensors" in refused(valid)


def test_import_refused_is_a_store_error():
    assert issubclass(ImportRefused, StoreError)
