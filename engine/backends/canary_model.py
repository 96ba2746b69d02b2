"""The built-in tiny model the CPU canary runs: a one-layer ``llama`` GGUF written on the spot.

Its weights are random but fixed (one seed), its vocabulary is 256 placeholder tokens (tokenizer
``none``: the canary feeds token ids, never text), and every matrix is 256 wide so that the
K-quants (256-value super-blocks), the repacked layouts (rows in groups of 8) and AMX tiles all
apply to it once llama.cpp's own quantizer has converted it. The file is about 3 MB in f32 and is
written in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

ARCH = "llama"
N_VOCAB = 256
N_EMBD = 256
N_FF = 512
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD
SEED = 20261130


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)

    def matrix(rows: int, cols: int) -> np.ndarray:  # gguf-py takes (rows, cols) = (ne1, ne0)
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    ones = np.ones(N_EMBD, dtype=np.float32)
    return {
        "token_embd.weight": matrix(N_VOCAB, N_EMBD),
        "blk.0.attn_norm.weight": ones,
        "blk.0.attn_q.weight": matrix(N_EMBD, N_EMBD),
        "blk.0.attn_k.weight": matrix(N_HEAD_KV * HEAD_DIM, N_EMBD),
        "blk.0.attn_v.weight": matrix(N_HEAD_KV * HEAD_DIM, N_EMBD),
        "blk.0.attn_output.weight": matrix(N_EMBD, N_EMBD),
        "blk.0.ffn_norm.weight": ones,
        "blk.0.ffn_gate.weight": matrix(N_FF, N_EMBD),
        "blk.0.ffn_up.weight": matrix(N_FF, N_EMBD),
        "blk.0.ffn_down.weight": matrix(N_EMBD, N_FF),
        "output_norm.weight": ones,
        "output.weight": matrix(N_VOCAB, N_EMBD),
    }


def write_canary_model(path: Path) -> Path:
    """Write the f32 canary model to ``path`` and return it."""
    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name("hearth-cpu-canary")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, value in {"context_length": 256, "embedding_length": N_EMBD, "block_count": 1,
                       "feed_forward_length": N_FF, "attention.head_count": N_HEAD,
                       "attention.head_count_kv": N_HEAD_KV, "rope.dimension_count": HEAD_DIM,
                       "vocab_size": N_VOCAB}.items():
        writer.add_uint32(f"{ARCH}.{key}", value)
    writer.add_float32(f"{ARCH}.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_tokenizer_model("none")
    for name, array in _tensors().items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
