"""A qwen35 GGUF as the NPU exporter sees it: hyper-parameters and dequantized fp32 weights.

The GGUF is the source of truth (``llama-cpp-hybrid.md`` §C): the exporter reads the same keys
and tensors llama.cpp's ``qwen35`` loader reads, and refuses anything it cannot reproduce exactly
(another architecture, RoPE scaling, a fused attention QKV tensor, ...) with a reason the router
can show. Weights keep the GGUF's *values*; only their storage changes:

* numpy shape is ggml's ``ne`` reversed, so a ggml ``{n_in, n_out}`` matrix is ``(n_out, n_in)``;
* quantized tensors are dequantized to fp32 by gguf-py (the graph runs fp32 I/O; the HTP itself
  computes in fp16, ``qnn-htp.md`` §0.1);
* the conventions llama.cpp's converter baked in stay as they are: norm weights already hold
  ``1 + w``, ``ssm_a`` is ``-exp(A_log)``, value heads are in *tiled* order (value head ``j`` reads
  key group ``j % Hk``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

SUPPORTED_ARCH = "qwen35"


class UnsupportedModel(ValueError):
    """The exporter cannot build this model's prefill graph; the message says why."""


@dataclass(frozen=True)
class Qwen35Config:
    """The trunk of a qwen35 model (MTP blocks are not part of the prefill)."""

    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rope_sections: tuple[int, int, int, int]
    rope_freq_base: float
    rms_eps: float
    kq_scale: float
    ssm_conv: int  # d_conv
    ssm_state: int  # S: key and value head dim of the DeltaNet
    ssm_groups: int  # Hk
    ssm_v_heads: int  # Hv
    recurrent: tuple[bool, ...]  # per trunk layer

    @property
    def key_dim(self) -> int:
        return self.ssm_state * self.ssm_groups

    @property
    def value_dim(self) -> int:
        return self.ssm_state * self.ssm_v_heads

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    @property
    def kv_dim(self) -> int:
        return self.head_dim * self.n_head_kv

    @property
    def recurrent_layers(self) -> list[int]:
        return [i for i, r in enumerate(self.recurrent) if r]

    @property
    def attention_layers(self) -> list[int]:
        return [i for i, r in enumerate(self.recurrent) if not r]


def _field(reader: gguf.GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise UnsupportedModel(f"the GGUF lacks {key}")
        return default
    return field.contents()


def _one_value(value, layers: list[int], key: str) -> int:
    """A per-layer key may be an array; the exporter needs one value over the given layers."""
    if not isinstance(value, list):
        return int(value)
    values = {int(value[i]) for i in layers}
    if len(values) != 1:
        raise UnsupportedModel(f"{key} differs between layers ({sorted(values)})")
    return values.pop()


def _recurrent_flags(reader: gguf.GGUFReader, arch: str, n_layer: int) -> tuple[bool, ...]:
    flags = reader.fields.get(f"{arch}.attention.recurrent_layers")
    if flags is not None:
        return tuple(bool(x) for x in flags.contents()[:n_layer])
    interval = int(_field(reader, f"{arch}.full_attention_interval", 4))
    return tuple((i + 1) % interval != 0 for i in range(n_layer))


def _embedding_rows(reader: gguf.GGUFReader) -> int:
    for tensor in reader.tensors:
        if tensor.name == "token_embd.weight":
            return int(tensor.shape[1])
    raise UnsupportedModel("the GGUF has no token_embd.weight")


def _attention_params(get, recurrent: tuple[bool, ...], n_embd: int) -> dict:
    layers = [i for i, r in enumerate(recurrent) if not r] or [0]
    n_head = _one_value(get("attention.head_count"), layers, "head_count")
    head_dim = int(get("attention.key_length", n_embd // n_head))
    if int(get("attention.value_length", head_dim)) != head_dim:
        raise UnsupportedModel("attention key and value head sizes differ")
    sections = tuple(int(x) for x in get("rope.dimension_sections"))
    scale = float(get("attention.scale", 0.0))
    return dict(
        n_head=n_head, n_head_kv=_one_value(get("attention.head_count_kv"), layers, "head_count_kv"),
        head_dim=head_dim, n_rot=int(get("rope.dimension_count", head_dim)), rope_sections=(sections + (0,) * 4)[:4],
        rope_freq_base=float(get("rope.freq_base", 10000.0)), kq_scale=scale or 1.0 / float(np.sqrt(head_dim)),
    )  # fmt: skip


def _ssm_params(get) -> dict:
    return dict(ssm_conv=int(get("ssm.conv_kernel")), ssm_state=int(get("ssm.state_size")),
                ssm_groups=int(get("ssm.group_count")), ssm_v_heads=int(get("ssm.time_step_rank")))


def read_config(reader: gguf.GGUFReader) -> Qwen35Config:
    """The hyper-parameters, or :class:`UnsupportedModel` naming what the exporter cannot do."""
    arch = _field(reader, "general.architecture")
    if arch != SUPPORTED_ARCH:
        raise UnsupportedModel(f"the NPU prefill graph exists for {SUPPORTED_ARCH} only, not {arch}")

    def get(key: str, default=None):
        return _field(reader, f"{arch}.{key}", default)

    if get("rope.scaling.type", "none") not in ("none", ""):
        raise UnsupportedModel("RoPE scaling is not implemented in the NPU graph")
    n_layer = int(get("block_count")) - int(get("nextn_predict_layers", 0))
    recurrent = _recurrent_flags(reader, arch, n_layer)
    n_embd = int(get("embedding_length"))
    return Qwen35Config(n_vocab=_embedding_rows(reader), n_embd=n_embd, n_layer=n_layer,
                        rms_eps=float(get("attention.layer_norm_rms_epsilon")), recurrent=recurrent,
                        **_attention_params(get, recurrent, n_embd), **_ssm_params(get))


def _dequantize(tensor) -> np.ndarray:
    values = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
    return np.ascontiguousarray(values, dtype=np.float32).reshape(tuple(int(n) for n in reversed(tensor.shape)))


def _check_tensors(config: Qwen35Config, names: set[str], ssm_a: Callable[[int], np.ndarray]) -> None:
    """Refuse tensor layouts the graph does not build; ``ssm_a(il)`` reads layer il's (small) decay."""
    if config.ssm_v_heads % config.ssm_groups:
        raise UnsupportedModel("the DeltaNet value heads are not a multiple of its key heads")
    for il in config.attention_layers:
        if f"blk.{il}.attn_q.weight" not in names:
            raise UnsupportedModel(f"layer {il} stores a fused attention QKV tensor; not implemented")
    for il in config.recurrent_layers:
        if not {f"blk.{il}.attn_qkv.weight", f"blk.{il}.attn_gate.weight", f"blk.{il}.ssm_a"} <= names:
            raise UnsupportedModel(f"DeltaNet layer {il} lacks attn_qkv/attn_gate/ssm_a")
        if np.any(ssm_a(il) >= 0):
            raise UnsupportedModel(f"layer {il} has ssm_a >= 0 (the decay would grow)")


def check_model(path: Path | str) -> Qwen35Config:
    """The config of a GGUF the exporter can build, checked without dequantizing the big tensors
    (a cheap test at model load); raises :class:`UnsupportedModel` saying why not."""
    reader = gguf.GGUFReader(str(path))
    config = read_config(reader)
    tensors = {t.name: t for t in reader.tensors}
    _check_tensors(config, set(tensors), lambda il: _dequantize(tensors[f"blk.{il}.ssm_a"]))
    return config


def load_model(path: Path | str) -> tuple[Qwen35Config, dict[str, np.ndarray]]:
    """Config and trunk weights (fp32) of a qwen35 GGUF; the output head falls back to the embedding."""
    reader = gguf.GGUFReader(str(path))
    config = read_config(reader)
    trunk = {f"blk.{i}." for i in range(config.n_layer)}
    weights = {
        t.name: _dequantize(t) for t in reader.tensors
        if not t.name.startswith("blk.") or t.name[: t.name.index(".", 4) + 1] in trunk
    }  # fmt: skip
    weights.setdefault("output.weight", weights["token_embd.weight"])
    _check_tensors(config, set(weights), lambda il: weights[f"blk.{il}.ssm_a"])
    return config, weights
