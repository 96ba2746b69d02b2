"""The fake backend's state blobs (tests/fakes/fake_backend.py): llama.cpp's per-sequence layout
(:mod:`engine.state.seq_state`: header, attention cells, recurrent part), written and read here by
code of its own, so a blob the engine changed on the way is refused, not read back as if right.

The recurrent part of a hybrid is a running FNV-1a hash of the tokens (:func:`recurrent_of`).
"""

from __future__ import annotations

import struct

from engine.state.seq_state import MAGIC

N_LAYER = 2
ROW_TYPE = 1  # ggml's F16 (only a label here)
_CELL_META = struct.Struct("<iIi")  # position, number of sequences (1), sequence id
_ROW = struct.Struct("<ii")  # K row of layer l: (token, l); V row: (position, token)
_U32, _I32, _U64 = struct.Struct("<I"), struct.Struct("<i"), struct.Struct("<Q")
_HASH_START, _HASH_PRIME, _MASK64 = 0xCBF29CE484222325, 0x100000001B3, 2**64 - 1
TORN = b"\xff" * 8  # the recurrent part after an aborted decode wrote some of its layers


def recurrent_step(state: bytes, token: int) -> bytes:
    """The recurrent part after ``token`` (a running FNV-1a hash of the tokens)."""
    value = _U64.unpack(state)[0] if len(state) == 8 else _HASH_START
    return _U64.pack(((value ^ (token + 1)) * _HASH_PRIME) & _MASK64)


def recurrent_of(tokens: list[int]) -> bytes:
    state = _U64.pack(_HASH_START)
    for token in tokens:
        state = recurrent_step(state, token)
    return state


# -- the state blob: written and read here, independently of engine.state.seq_state ---------------


def encode_state(seq_id: int, tokens: list[int], recurrent: bytes) -> bytes:
    """The sequence's state as llama.cpp lays it out: header, attention cells, recurrent part."""
    out = [_U32.pack(MAGIC), _I32.pack(seq_id), _U32.pack(1), _U32.pack(len(tokens))]
    if tokens:
        out += [_CELL_META.pack(pos, 1, seq_id) for pos in range(len(tokens))]
        out += [_U32.pack(0), _U32.pack(N_LAYER)]
        for layer in range(N_LAYER):
            out += [_I32.pack(ROW_TYPE), _U64.pack(_ROW.size), *(_ROW.pack(t, layer) for t in tokens)]
        for _ in range(N_LAYER):
            out += [_I32.pack(ROW_TYPE), _U64.pack(_ROW.size),
                    *(_ROW.pack(pos, t) for pos, t in enumerate(tokens))]
    return b"".join(out) + recurrent


def encode_partial(seq_id: int, recurrent: bytes) -> bytes:
    """The recurrent part alone, as llama.cpp writes it for ``STATE_PARTIAL_ONLY``: the header, then the part."""
    return _U32.pack(MAGIC) + _I32.pack(seq_id) + recurrent


class BlobRefused(ValueError):
    pass


class _BlobReader:
    def __init__(self, blob: bytes) -> None:
        self.blob, self.offset = blob, 0

    def take(self, fmt: struct.Struct) -> tuple:
        if self.offset + fmt.size > len(self.blob):
            raise BlobRefused("the blob ends early")
        values = fmt.unpack_from(self.blob, self.offset)
        self.offset += fmt.size
        return values

    def expect(self, fmt: struct.Struct, wanted: tuple, what: str) -> None:
        found = self.take(fmt)
        if found != wanted:
            raise BlobRefused(f"{what}: {found} instead of {wanted}")

    def rest(self) -> bytes:
        return self.blob[self.offset:]


def decode_state(blob: bytes, seq_id: int, recurrent_bytes: int, n_vocab: int) -> tuple[list[int], bytes]:
    """(tokens, recurrent part) of a whole blob; :class:`BlobRefused` unless every byte is as
    :func:`encode_state` writes it."""
    reader = _BlobReader(blob)
    _header(reader, seq_id)
    reader.expect(_U32, (1,), "streams")
    (count,) = reader.take(_U32)
    tokens: list[int] = []
    if count:
        for pos in range(count):
            reader.expect(_CELL_META, (pos, 1, seq_id), f"cell {pos}")
        reader.expect(_U32, (0,), "V transposed")
        reader.expect(_U32, (N_LAYER,), "layers")
        tokens = _k_rows(reader, count)
        _check_v_rows(reader, tokens)
    recurrent = reader.rest()
    if len(recurrent) != recurrent_bytes or any(not 0 <= t < n_vocab for t in tokens):
        raise BlobRefused("the recurrent part or a token is out of place")
    return tokens, recurrent


def _header(reader: _BlobReader, seq_id: int) -> None:
    reader.expect(_U32, (MAGIC,), "magic")
    reader.expect(_I32, (seq_id,), "sequence")


def _k_rows(reader: _BlobReader, count: int) -> list[int]:
    """Every layer's K rows; returns the tokens they name."""
    tokens: list[int] = []
    for layer in range(N_LAYER):
        reader.expect(_I32, (ROW_TYPE,), "K type")
        reader.expect(_U64, (_ROW.size,), "K row bytes")
        rows = [reader.take(_ROW) for _ in range(count)]
        tokens = tokens or [token for token, _ in rows]
        if rows != [(token, layer) for token in tokens]:
            raise BlobRefused(f"the K rows of layer {layer} do not match")
    return tokens


def _check_v_rows(reader: _BlobReader, tokens: list[int]) -> None:
    for layer in range(N_LAYER):
        reader.expect(_I32, (ROW_TYPE,), "V type")
        reader.expect(_U64, (_ROW.size,), "V row bytes")
        for pos, token in enumerate(tokens):
            reader.expect(_ROW, (pos, token), f"V row {pos} of layer {layer}")


# -- the backend -----------------------------------------------------------------------------------


def decode_partial(blob: bytes, seq_id: int, recurrent_bytes: int) -> bytes:
    """The recurrent part of an :func:`encode_partial` blob; :class:`BlobRefused` unless it is one."""
    reader = _BlobReader(blob)
    _header(reader, seq_id)
    recurrent = reader.rest()
    if len(recurrent) != recurrent_bytes:
        raise BlobRefused(f"a recurrent part of {len(recurrent)} bytes, not {recurrent_bytes}")
    return recurrent
