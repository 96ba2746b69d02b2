"""The qwen35 prefill as one static-shape ONNX graph over a chunk of C tokens.

One run of the graph reads C tokens (the last chunk of a prompt may be partial: ``n_valid`` < C,
the rest is padding) and every piece of model state, and returns the updated state:

inputs   ``tokens`` int32 [C], ``pos_offset`` int32 [1] (position of the first token),
         ``n_valid`` int32 [1];
         per DeltaNet layer i: ``conv_state.i`` [conv_dim, d_conv−1], ``ssm_state.i`` [Hv, S, S];
         per attention layer i: ``past_k.i``, ``past_v.i`` [max_ctx, kv_dim] (row p = position p;
         rows ≥ pos_offset are ignored)
outputs  ``logits`` [1, n_vocab] of the last real token;
         ``conv_state_out.i``, ``ssm_state_out.i``; ``k_new.i``, ``v_new.i`` [C, kv_dim] (rows of
         the chunk's tokens; the host copies the first n_valid into its buffer at pos_offset)

Every state tensor is in llama.cpp's layout (``llama-cpp-hybrid.md`` §B3), so the hand-off to a
CPU context is a copy. The trunk is the usual pre-norm residual stack,
``x += mixer(rmsnorm(x)); x += W_down(SiLU(W_gate h) · W_up h)`` with h = rmsnorm(x) after the
mixer, then ``output_norm`` and the LM head on the last real row (picked by a one-hot MatMul).

Everything that depends on ``pos_offset`` and ``n_valid`` (padding flags, the conv-state
selection, the attention mask, the RoPE rows) is derived inside the graph with Less/Equal/Cast,
an int32 Add and Gather, so the host passes three integers and the state, nothing precomputed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from engine.npu.attention_layer import MASK_NEG, AttentionIO, attention_layer, rope_tables
from engine.npu.deltanet_layer import DeltaNetIO, conv_select_offsets, deltanet_layer
from engine.npu.gguf_weights import Qwen35Config, load_model
from engine.npu.onnx_ops import GraphBuilder
from engine.npu.graph_shape import PrefillSpec

__all__ = ["PrefillSpec", "build_graph", "export_prefill"]


@dataclass(frozen=True)
class _ChunkTensors:
    valid: str
    last: str
    deltanet: DeltaNetIO
    attention: AttentionIO


def _chunk_tensors(b: GraphBuilder, spec: PrefillSpec) -> _ChunkTensors:
    c, n = spec.config, spec.chunk
    pos_offset, n_valid = b.input("pos_offset", np.int32, (1,)), b.input("n_valid", np.int32, (1,))
    index = np.arange(n, dtype=np.int32)
    valid = b.reshape(b.flag("Less", b.const(index, "iota"), n_valid), (n, 1))
    last = b.reshape(b.flag("Equal", b.const(index + 1, "iota1"), n_valid), (1, n))
    select = b.flag("Equal", b.const(conv_select_offsets(c, n), "conv_offsets"), n_valid)
    positions = b.add(pos_offset, b.const(index, "iota"))
    cos_table, sin_table = rope_tables(c, spec.max_ctx + n)
    cos, sin = (b.reshape(b.op("Gather", b.const(t, "rope"), positions, axis=0), (n, 1, c.n_rot // 2))
                for t in (cos_table, sin_table))
    slots = b.const(np.arange(spec.max_ctx, dtype=np.int32).reshape(1, -1), "slots")
    past = b.op("Tile", b.flag("Less", slots, pos_offset), b.const(np.array([n, 1], np.int64), "repeats"))
    allowed = b.concat([past, b.const(np.tril(np.ones((n, n), np.float32)), "causal")], axis=1)
    mask = b.scale(b.sub(b.const(np.float32(1.0), "one"), allowed), MASK_NEG)
    return _ChunkTensors(valid, last, DeltaNetIO(valid, select), AttentionIO(cos, sin, mask))


def _ffn(b: GraphBuilder, x: str, weights: dict[str, np.ndarray], il: int) -> str:
    gate = b.silu(b.linear(x, weights[f"blk.{il}.ffn_gate.weight"], "w_ffn_gate"))
    up = b.linear(x, weights[f"blk.{il}.ffn_up.weight"], "w_ffn_up")
    return b.linear(b.mul(gate, up), weights[f"blk.{il}.ffn_down.weight"], "w_ffn_down")


def _mixer(b: GraphBuilder, h: str, weights: dict[str, np.ndarray], spec: PrefillSpec, il: int,
           io: _ChunkTensors) -> str:
    """The layer's mixer output; its state inputs and outputs are declared here."""
    c, n, shapes = spec.config, spec.chunk, spec.state_shapes()
    if c.recurrent[il]:
        names = (f"conv_state.{il}", f"ssm_state.{il}")
        conv, ssm = (b.input(name, np.float32, shapes[name]) for name in names)
        out, conv_out, ssm_out = deltanet_layer(b, h, weights, c, il, n, io.deltanet, conv, ssm)
        b.output(conv_out, f"conv_state_out.{il}", shapes[names[0]])
        b.output(ssm_out, f"ssm_state_out.{il}", shapes[names[1]])
        return out
    past_k, past_v = (b.input(f"{kind}.{il}", np.float32, shapes[f"{kind}.{il}"]) for kind in ("past_k", "past_v"))
    out, k_rows, v_rows = attention_layer(b, h, weights, c, il, n, io.attention, past_k, past_v, spec.max_ctx)
    b.output(k_rows, f"k_new.{il}", (n, c.kv_dim))
    b.output(v_rows, f"v_new.{il}", (n, c.kv_dim))
    return out


def build_graph(config: Qwen35Config, weights: dict[str, np.ndarray], chunk: int, max_ctx: int) -> onnx.ModelProto:
    """The prefill graph of a loaded model for chunks of ``chunk`` tokens and ``max_ctx`` positions."""
    spec = PrefillSpec(config, chunk, max_ctx)
    b = GraphBuilder(f"hearth-qwen35-prefill-c{chunk}")
    tokens = b.input("tokens", np.int32, (chunk,))
    io = _chunk_tensors(b, spec)
    x = b.op("Gather", b.const(weights["token_embd.weight"], "token_embd"), tokens, axis=0)
    for il in range(config.n_layer):
        x = b.add(x, _mixer(b, b.rms_norm(x, weights[f"blk.{il}.attn_norm.weight"], config.rms_eps),
                            weights, spec, il, io))
        h = b.rms_norm(x, weights[f"blk.{il}.post_attention_norm.weight"], config.rms_eps)
        x = b.add(x, _ffn(b, h, weights, il))
    last = b.rms_norm(b.matmul(io.last, x), weights["output_norm.weight"], config.rms_eps)
    b.output(b.linear(last, weights["output.weight"], "w_head"), "logits", (1, config.n_vocab))
    return b.model()


def export_prefill(path: Path | str, chunk: int = 64, max_ctx: int = 4096) -> tuple[PrefillSpec, bytes]:
    """Read a qwen35 GGUF and export its prefill graph (serialized ONNX). Raises
    :class:`~engine.npu.gguf_weights.UnsupportedModel` for models the exporter cannot build."""
    if chunk < 2 or max_ctx < 1:
        raise ValueError(f"chunk must be at least 2 and max_ctx positive (got {chunk}, {max_ctx})")
    config, weights = load_model(path)
    return PrefillSpec(config, chunk, max_ctx), build_graph(config, weights, chunk, max_ctx).SerializeToString()
