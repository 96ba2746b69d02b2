"""Hand-off between the graph's state and llama.cpp's sequence-state blob, both ways.

A blob (``llama-cpp-hybrid.md`` §B2) is ``magic, seq_id``, the attention-KV part and the
recurrent part. :mod:`engine.state.seq_state` already splits and rebuilds the KV part by cells
(:class:`~engine.state.seq_state.KvCells`); this module adds the recurrent part of a single
sequence and the tensor conversions:

recurrent part  ``u32 cell_count=1; i32 pos (last position); u32 n_seq_id=0; u32 s_trans=0;
                u32 n_layer (trunk)``, then for each DeltaNet layer ``i32 type=F32, u64 row bytes,
                conv row`` and after them, for each DeltaNet layer, the same for the recurrent row.
KV cells        per token: meta ``pos, n_seq_id=1, [x=pos, y=pos, tok], seq_id`` (the bracketed
                fields exist for IMROPE models such as qwen35: 24 bytes, else 12), then per
                attention layer a K row and a V row in the cache's type (f16 by default).

The graph already produces every tensor in llama.cpp's layout, so the conversion is a copy plus a
dtype change for K/V. ``state_from_blob`` is the reverse, so a llama.cpp state (or a snapshot) can
seed the NPU graph, and tests can compare the two backends tensor by tensor.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from engine.npu.prefill import PrefillState
from engine.state.seq_state import KvCells, KvLayout, StateFormatError, build_blob, parse_kv, split_header

if TYPE_CHECKING:
    from engine.npu.gguf_weights import Qwen35Config

GGML_F32, GGML_F16 = 0, 1
_KV_DTYPES = {GGML_F32: np.dtype("<f4"), GGML_F16: np.dtype("<f2")}
_HEAD = struct.Struct("<IiIII")  # cell_count, pos, n_seq_id, s_trans, n_layer
_ROW = struct.Struct("<iQ")  # ggml type, row bytes


def kv_layout(config: Qwen35Config, kv_type: int = GGML_F16, *, meta_bytes: int = 24) -> KvLayout:
    """The KV layout of a default Hearth context (one stream, flash attention so V not transposed)."""
    if kv_type not in _KV_DTYPES:
        raise ValueError(f"K/V cache type {kv_type} is not supported by the hand-off (f32 and f16 are)")
    row = (kv_type, config.kv_dim * _KV_DTYPES[kv_type].itemsize)
    n_attn = len(config.attention_layers)
    return KvLayout(1, 0, meta_bytes, 0, (row,) * n_attn, (row,) * n_attn)


def _kv_dtype(kind: int) -> np.dtype:
    if kind not in _KV_DTYPES:
        raise StateFormatError(f"K/V cache type {kind} is not supported by the hand-off (f32 and f16 are)")
    return _KV_DTYPES[kind]


def _kv_rows(layout_rows: tuple[tuple[int, int], ...], buffers: list[np.ndarray]) -> list[np.ndarray]:
    rows = []
    for (kind, row_bytes), buffer in zip(layout_rows, buffers):
        encoded = np.ascontiguousarray(buffer, dtype=_kv_dtype(kind)).view(np.uint8)
        if encoded.shape[1] != row_bytes:
            raise StateFormatError(f"K/V rows of {encoded.shape[1]} bytes do not fit the cache's {row_bytes}")
        rows.append(encoded)
    return rows


def _cell_meta(tokens: list[int], meta_bytes: int, seq_id: int) -> np.ndarray:
    pos = np.arange(len(tokens), dtype=np.int32)
    ones, seq = np.ones_like(pos), np.full_like(pos, seq_id)
    if meta_bytes == 24:
        columns = (pos, ones, pos, pos, np.asarray(tokens, np.int32), seq)
    elif meta_bytes == 12:
        columns = (pos, ones, seq)
    else:
        raise StateFormatError(f"KV cells of {meta_bytes} metadata bytes are not supported")
    return np.ascontiguousarray(np.stack(columns, axis=1).astype("<i4")).view(np.uint8)


def _recurrent_shapes(config: Qwen35Config) -> dict[str, tuple[int, ...]]:
    return {"conv_state": (config.conv_dim, config.ssm_conv - 1),
            "ssm_state": (config.ssm_v_heads, config.ssm_state, config.ssm_state)}


def recurrent_size(config: Qwen35Config) -> int:
    """Bytes of the recurrent part of a one-sequence blob (what ``PARTIAL_ONLY`` returns after the header)."""
    rows = sum(_ROW.size + 4 * int(np.prod(shape)) for shape in _recurrent_shapes(config).values())
    return _HEAD.size + rows * len(config.recurrent_layers)


def _recurrent_part(config: Qwen35Config, state: PrefillState) -> bytes:
    parts = [_HEAD.pack(1, state.n_past - 1, 0, 0, config.n_layer)]
    for kind in ("conv_state", "ssm_state"):
        for il in config.recurrent_layers:
            row = np.ascontiguousarray(state.tensors[f"{kind}.{il}"], dtype="<f4").tobytes()
            parts.append(_ROW.pack(GGML_F32, len(row)) + row)
    return b"".join(parts)


def state_to_blob(config: Qwen35Config, state: PrefillState, layout: KvLayout, seq_id: int = 0) -> np.ndarray:
    """llama.cpp's sequence-state blob for ``state`` (load it with ``LlamaContext.state_set``)."""
    n, tokens = state.n_past, state.tokens
    attn = config.attention_layers
    cells = KvCells(np.arange(n, dtype=np.int32), _cell_meta(tokens, layout.meta_bytes, seq_id),
                    _kv_rows(layout.k, [state.tensors[f"past_k.{il}"][:n] for il in attn]),
                    _kv_rows(layout.v, [state.tensors[f"past_v.{il}"][:n] for il in attn]))
    return build_blob(seq_id, layout, [cells.to_bytes()], _recurrent_part(config, state))


def _read_recurrent(config: Qwen35Config, part: bytes) -> tuple[int, dict[str, np.ndarray]]:
    count, pos, n_seq_id, s_trans, n_layer = _HEAD.unpack_from(part, 0)
    if (count, n_seq_id, s_trans, n_layer) != (1, 0, 0, config.n_layer):
        raise StateFormatError("the recurrent part is not one plain sequence of this model")
    offset, tensors = _HEAD.size, {}
    for kind, shape in _recurrent_shapes(config).items():
        for il in config.recurrent_layers:
            kind_id, row_bytes = _ROW.unpack_from(part, offset)
            offset += _ROW.size
            if kind_id != GGML_F32 or row_bytes != 4 * int(np.prod(shape)):
                raise StateFormatError(f"layer {il} {kind} row is not f32 {shape}")
            tensors[f"{kind}.{il}"] = np.frombuffer(part, "<f4", int(np.prod(shape)), offset).reshape(shape).copy()
            offset += row_bytes
    return pos, tensors


def state_from_blob(config: Qwen35Config, blob: bytes, max_ctx: int) -> PrefillState:
    """The graph state (KV buffers of ``max_ctx`` rows) held in a llama.cpp sequence blob."""
    _, body = split_header(blob)
    recurrent_bytes = recurrent_size(config)
    layout, cells = parse_kv(body, len(body) - recurrent_bytes)
    last, tensors = _read_recurrent(config, body[len(body) - recurrent_bytes :])
    n = len(cells.positions)
    if not np.array_equal(cells.positions, np.arange(n)) or last != n - 1:
        raise StateFormatError("the blob's positions are not 0 … n−1")
    for kind, rows, layout_rows in (("past_k", cells.k, layout.k), ("past_v", cells.v, layout.v)):
        for il, raw, (kind_id, _) in zip(config.attention_layers, rows, layout_rows):
            buffer = np.zeros((max_ctx, config.kv_dim), np.float32)
            buffer[:n] = raw.copy().view(_kv_dtype(kind_id)).reshape(n, config.kv_dim)
            tensors[f"{kind}.{il}"] = buffer
    tokens = [] if layout.meta_bytes != 24 else cells.meta.copy().view("<i4")[:, 4].tolist()
    return PrefillState(tensors, tokens or [0] * n)
