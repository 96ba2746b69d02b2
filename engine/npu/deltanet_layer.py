"""One qwen35 Gated DeltaNet mixer for a chunk, as llama.cpp's ``qwen35`` graph computes it.

    qkv = W_qkv x,  z = W_gate x,  β = σ(W_beta x),  g = softplus(W_alpha x + dt_bias) · ssm_a
    qkv ← SiLU(causal depthwise conv over [conv state | qkv])        (kernel d_conv, no bias)
    q, k, v = split(qkv) as [q: Hk heads | k: Hk heads | v: Hv heads] of size S
    q ← l2norm(q) / √S,  k ← l2norm(k);  value head j reads key group j mod Hk ("tiled", so Tile)
    o = GatedDeltaNet(q, k, v, g, β; state)                           (:mod:`engine.npu.gdn_chunk`)
    out = W_out · (rmsnorm(o) · ssm_norm · SiLU(z))                   (per head)

State layouts are llama.cpp's own, so the hand-off is a copy (``llama-cpp-hybrid.md`` §B3):

* conv state [conv_dim, d_conv−1]: the pre-conv qkv inputs of the last d_conv−1 tokens, channel
  major, oldest first. The window is ``[stateᵀ ; qkv]`` ([d_conv−1+C, conv_dim], token-major, so
  the convolution is d_conv shifted row slices); the new state is its rows n_valid …
  n_valid+d_conv−2, transposed, picked by a MatMul with a 0/1 selection matrix the chunk builds
  from ``n_valid`` (a dynamic Slice start is avoided);
* recurrent state [Hv, S_v, S_k]: each head transposed relative to fla's [S_k, S_v].

Padding tokens of a partial chunk get β = 0 and g = 0 (``valid`` is 0 there), so they leave the
recurrent state as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.npu.gdn_chunk import gdn_chunk
from engine.npu.gguf_weights import Qwen35Config
from engine.npu.onnx_ops import GraphBuilder


@dataclass(frozen=True)
class DeltaNetIO:
    """The per-chunk tensors a DeltaNet layer reads besides its own state."""

    valid: str  # [C, 1]: 1 for real tokens, 0 for padding
    conv_select: str  # [d_conv−1+C, d_conv−1]: picks the window's last d_conv−1 real columns


def conv_select_offsets(config: Qwen35Config, chunk: int) -> np.ndarray:
    """``row − column`` of the selection matrix; it is 1 where this equals n_valid."""
    rows, cols = np.indices((config.ssm_conv - 1 + chunk, config.ssm_conv - 1))
    return (rows - cols).astype(np.int32)


def _causal_conv(b: GraphBuilder, qkv: str, conv_state: str, kernel: np.ndarray, select: str,
                 chunk: int) -> tuple[str, str]:
    """(SiLU(conv) [C, conv_dim], new conv state [conv_dim, d_conv−1]).

    The convolution is d_conv shifted Mul/Adds over the token-major window, not a ``Conv`` node:
    the emulated HTP's depthwise Conv gave 3.6e-3 relative error on layer 0 of hybrid-tiny where
    the Mul/Add form gives 7.5e-4 (fp16 rounding), and that error reached q, k and v directly.
    """
    channels, width = kernel.shape
    rows = b.concat([b.transpose(conv_state, (1, 0)), qkv], axis=0)  # [d_conv−1+C, channels], oldest first
    new_state = b.matmul(b.transpose(rows, (1, 0)), select)
    conv = None
    for tap in range(width):
        term = b.mul(b.slice(rows, 0, tap, tap + chunk), b.const(np.ascontiguousarray(kernel[:, tap]), "conv"))
        conv = term if conv is None else b.add(conv, term)
    return b.silu(conv), new_state


def _heads(b: GraphBuilder, x: str, start: int, n_heads: int, size: int, chunk: int) -> str:
    """Columns start … start+n_heads·size of x [C, ·] as [C, n_heads, size]."""
    return b.reshape(b.slice(x, 1, start, start + n_heads * size), (chunk, n_heads, size))


def _per_head(b: GraphBuilder, x: str) -> str:
    """[C, H, d] → [H, C, d]."""
    return b.transpose(x, (1, 0, 2))


def _decay_and_beta(b: GraphBuilder, x: str, w, valid: str, heads: int, chunk: int) -> tuple[str, str]:
    """g = softplus(α + dt_bias)·ssm_a and β = σ(b), both zeroed on padding, as [Hv, C, 1]."""
    beta = b.mul(b.sigmoid(b.linear(x, w("ssm_beta.weight"))), valid)
    alpha = b.add(b.linear(x, w("ssm_alpha.weight")), b.const(w("ssm_dt.bias"), "dt_bias"))
    g = b.mul(b.mul(b.softplus(alpha), b.const(w("ssm_a"), "ssm_a")), valid)
    return tuple(b.reshape(b.transpose(t, (1, 0)), (heads, chunk, 1)) for t in (g, beta))


def deltanet_layer(b: GraphBuilder, x: str, weights: dict[str, np.ndarray], config: Qwen35Config, il: int,
                   chunk: int, io: DeltaNetIO, conv_state: str, ssm_state: str) -> tuple[str, str, str]:
    """(mixer output [C, n_embd], new conv state, new recurrent state) of layer ``il``."""
    def w(name: str) -> np.ndarray:
        return weights[f"blk.{il}.{name}"]

    S, hk, hv = config.ssm_state, config.ssm_groups, config.ssm_v_heads
    qkv = b.linear(x, w("attn_qkv.weight"), "w_qkv")
    mixed, conv_out = _causal_conv(b, qkv, conv_state, w("ssm_conv1d.weight"), io.conv_select, chunk)
    q = b.scale(b.l2_norm(_heads(b, mixed, 0, hk, S, chunk), config.rms_eps), 1.0 / np.sqrt(S))
    k = b.l2_norm(_heads(b, mixed, config.key_dim, hk, S, chunk), config.rms_eps)
    if hv != hk:
        repeats = b.const(np.array([1, hv // hk, 1], np.int64), "repeats")
        q, k = b.op("Tile", q, repeats), b.op("Tile", k, repeats)
    v = _heads(b, mixed, 2 * config.key_dim, hv, S, chunk)
    g, beta = _decay_and_beta(b, x, w, io.valid, hv, chunk)
    state = b.transpose(ssm_state, (0, 2, 1))
    out, new_state = gdn_chunk(b, _per_head(b, q), _per_head(b, k), _per_head(b, v), g, beta, state, hv, chunk)
    z = b.reshape(b.linear(x, w("attn_gate.weight"), "w_gate"), (chunk, hv, S))
    gated = b.mul(b.rms_norm(_per_head(b, out), w("ssm_norm.weight"), config.rms_eps), b.silu(z))
    result = b.linear(b.reshape(gated, (chunk, hv * S)), w("ssm_out.weight"), "w_out")
    return result, conv_out, b.transpose(new_state, (0, 2, 1))
