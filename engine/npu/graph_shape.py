"""The static shape of an exported prefill graph, without the exporter.

Kept apart from :mod:`engine.npu.qwen35_graph` (which needs the ``onnx`` package) so the worker
can describe and run a graph it loaded from the EP-context cache without importing ``onnx``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.npu.gguf_weights import Qwen35Config


@dataclass(frozen=True)
class PrefillSpec:
    """The static shape of an exported graph and the names of its per-layer inputs/outputs."""

    config: Qwen35Config
    chunk: int
    max_ctx: int  # positions the KV buffers hold; a prompt may be at most this long

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every state input (name → shape); the output of ``conv_state.i`` is ``conv_state_out.i``."""
        c = self.config
        shapes: dict[str, tuple[int, ...]] = {}
        for il in c.recurrent_layers:
            shapes[f"conv_state.{il}"] = (c.conv_dim, c.ssm_conv - 1)
            shapes[f"ssm_state.{il}"] = (c.ssm_v_heads, c.ssm_state, c.ssm_state)
        for il in c.attention_layers:
            shapes[f"past_k.{il}"] = (self.max_ctx, c.kv_dim)
            shapes[f"past_v.{il}"] = (self.max_ctx, c.kv_dim)
        return shapes
