"""One qwen35 full-attention mixer for a chunk, with a host-carried KV buffer.

llama.cpp's qwen35 attention (``src/models/qwen35.cpp``), per token:

    [q | gate] per head = W_q x;  k = W_k x;  v = W_v x
    q ← rmsnorm(q)·q_norm,  k ← rmsnorm(k)·k_norm          (per head, before RoPE)
    q, k ← RoPE on the first n_rot dims of each head
    o = softmax(q kᵀ · kq_scale + mask) v                  (GQA: q head h reads kv head h // r)
    out = W_o (o · σ(gate))

RoPE. The GGUF says IMROPE with four position sections; for text llama.cpp feeds (p, p, p, 0), so
rotation pair i turns by p·θ^i unless the interleaved section rule gives it the 4th component,
which turns it by 0. Pairs are NEOX-style (dim i with dim i + n_rot/2). :func:`rope_tables` holds
cos/sin for every position the graph can see; they are built like ggml does (the angle is the
float32 position multiplied by θ in float32 once per pair), and gathered by position in the graph.

KV. K and V rows are [n_head_kv · head_dim] (head-major), K after norm and RoPE: exactly the rows
llama.cpp keeps in its cache and state blobs. The host keeps a buffer of ``max_ctx`` rows per
layer where row p holds position p; the chunk's own rows are appended after it. The mask lets
query i see buffer rows < pos_offset and chunk rows ≤ i. Grouped heads are handled by reshaping q
to [n_head_kv, r·C, head_dim], so K and V are never repeated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.npu.gguf_weights import Qwen35Config
from engine.npu.onnx_ops import GraphBuilder

MASK_NEG = -30000.0  # additive mask: exp underflows to exactly 0 in fp32, and it fits fp16


@dataclass(frozen=True)
class AttentionIO:
    """The per-chunk tensors an attention layer reads besides its KV buffer."""

    cos: str  # [C, 1, n_rot/2]
    sin: str
    mask: str  # [C, max_ctx + C], additive


def rotated_by_position(sections: tuple[int, int, int, int], n_pairs: int) -> np.ndarray:
    """Per rotation pair: True if IMROPE turns it by the token position, False if by 0."""
    total = max(sum(sections), 1)
    sector = np.arange(n_pairs) % total
    by_pos = np.zeros(n_pairs, bool)
    for axis in range(3):  # t, h, w are the position for text; e (axis 3) is 0
        by_pos |= (sector % 3 == axis) & (sector < 3 * sections[axis])
    return by_pos


def rope_tables(config: Qwen35Config, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [n_positions, n_rot/2] (float32), angle p·θ^i built like ggml's rope cache."""
    n_pairs = config.n_rot // 2
    theta_scale = np.float32(config.rope_freq_base) ** np.float32(-2.0 / config.n_rot)
    angle = np.zeros((n_positions, n_pairs), np.float32)
    theta = np.arange(n_positions, dtype=np.float32)
    for pair in range(n_pairs):
        angle[:, pair] = theta
        theta = theta * theta_scale
    angle *= rotated_by_position(config.rope_sections, n_pairs)
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def _rope(b: GraphBuilder, x: str, io: AttentionIO, n_rot: int, head_dim: int) -> str:
    half = n_rot // 2
    first, second = b.slice(x, 2, 0, half), b.slice(x, 2, half, n_rot)
    parts = [b.sub(b.mul(first, io.cos), b.mul(second, io.sin)),
             b.add(b.mul(second, io.cos), b.mul(first, io.sin))]
    if n_rot < head_dim:
        parts.append(b.slice(x, 2, n_rot, head_dim))
    return b.concat(parts, axis=2)


def _attend(b: GraphBuilder, q: str, keys: str, values: str, config: Qwen35Config, mask: str,
            chunk: int, length: int) -> str:
    """Softmax attention of q [C, n_head, hd] over keys/values [length, kv_dim]; [C, n_head, hd]."""
    nkv, hd, group = config.n_head_kv, config.head_dim, config.n_head // config.n_head_kv
    k = b.transpose(b.reshape(keys, (length, nkv, hd)), (1, 2, 0))  # [nkv, hd, L]
    v = b.transpose(b.reshape(values, (length, nkv, hd)), (1, 0, 2))  # [nkv, L, hd]
    q = b.reshape(b.transpose(q, (1, 0, 2)), (nkv, group * chunk, hd))
    scores = b.reshape(b.scale(b.matmul(q, k), config.kq_scale), (nkv, group, chunk, length))
    probs = b.op("Softmax", b.add(scores, mask), axis=-1)
    out = b.matmul(b.reshape(probs, (nkv, group * chunk, length)), v)
    return b.transpose(b.reshape(out, (config.n_head, chunk, hd)), (1, 0, 2))


def attention_layer(b: GraphBuilder, x: str, weights: dict[str, np.ndarray], config: Qwen35Config, il: int,
                    chunk: int, io: AttentionIO, past_k: str, past_v: str, max_ctx: int) -> tuple[str, str, str]:
    """(mixer output [C, n_embd], new K rows [C, kv_dim], new V rows [C, kv_dim]) of layer ``il``."""
    def w(name: str) -> np.ndarray:
        return weights[f"blk.{il}.{name}"]

    nh, nkv, hd = config.n_head, config.n_head_kv, config.head_dim
    q_full = b.reshape(b.linear(x, w("attn_q.weight"), "w_q"), (chunk, nh, 2 * hd))
    q = b.rms_norm(b.slice(q_full, 2, 0, hd), w("attn_q_norm.weight"), config.rms_eps)
    gate = b.sigmoid(b.slice(q_full, 2, hd, 2 * hd))
    k = b.rms_norm(b.reshape(b.linear(x, w("attn_k.weight"), "w_k"), (chunk, nkv, hd)),
                   w("attn_k_norm.weight"), config.rms_eps)
    q, k = _rope(b, q, io, config.n_rot, hd), _rope(b, k, io, config.n_rot, hd)
    k_rows = b.reshape(k, (chunk, nkv * hd))
    v_rows = b.linear(x, w("attn_v.weight"), "w_v")
    keys, values = b.concat([past_k, k_rows], axis=0), b.concat([past_v, v_rows], axis=0)
    attended = _attend(b, q, keys, values, config, io.mask, chunk, max_ctx + chunk)
    out = b.linear(b.reshape(b.mul(attended, gate), (chunk, nh * hd)), w("attn_output.weight"), "w_o")
    return out, k_rows, v_rows
