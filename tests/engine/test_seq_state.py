"""llama.cpp sequence-state blobs split into cells and put back together, byte for byte."""

import numpy as np
import pytest

from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.templates.prompts import raw_prompt_tokens
from engine.models.session import open_session
from engine.state.seq_state import (
    KvCells, Scatter, StateFormatError, build_blob, parse_kv, plan_blob, split_header,
)


@pytest.fixture(params=["hybrid_tiny", "smollm2"])
def fed_session(request):
    session = open_session(str(request.getfixturevalue(request.param)), n_ctx=512)
    session.feed(raw_prompt_tokens(session.model, "The quick brown fox jumps over the lazy dog."))
    for token in (40, 41, 42):
        session.feed([token])
    yield session
    session.close()


def parts(session):
    seq_id, body = split_header(session.context.state_get(0))
    recurrent = split_header(session.context.state_get(0, STATE_PARTIAL_ONLY))[1] if session.facts.is_hybrid else b""
    return seq_id, body, recurrent


def test_blob_splits_into_cells_and_rebuilds_identically(fed_session):
    seq_id, body, recurrent = parts(fed_session)
    layout, cells = parse_kv(body, len(body) - len(recurrent))
    assert np.array_equal(cells.positions, np.arange(fed_session.n_past))
    assert len(layout.k) == len(layout.v) >= 1
    assert build_blob(seq_id, layout, [cells.to_bytes()], recurrent).tobytes() == fed_session.context.state_get(0)


@pytest.mark.parametrize("cut", [1, 5, 11])
def test_cells_stored_in_two_pieces_reassemble(fed_session, cut):
    _, body, recurrent = parts(fed_session)
    layout, cells = parse_kv(body, len(body) - len(recurrent))
    head = KvCells(cells.positions[:cut], cells.meta[:cut], [a[:cut] for a in cells.k], [a[:cut] for a in cells.v])
    rebuilt = build_blob(0, layout, [head.to_bytes(), cells.since(cut).to_bytes()], recurrent)
    assert rebuilt.tobytes() == fed_session.context.state_get(0)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_pieces_streamed_in_chunks_land_in_place(fed_session, chunk):
    _, body, recurrent = parts(fed_session)
    layout, cells = parse_kv(body, len(body) - len(recurrent))
    cut = 5
    head = KvCells(cells.positions[:cut], cells.meta[:cut], [a[:cut] for a in cells.k], [a[:cut] for a in cells.v])
    pieces = [head.to_bytes(), cells.since(cut).to_bytes()]
    plan = plan_blob(0, layout, [cut, fed_session.n_past - cut], len(recurrent))
    blob = plan.allocate()
    for piece, sections in zip([*pieces, recurrent], [*plan.pieces, ((0, len(recurrent), plan.recurrent_offset),)]):
        scatter = Scatter(blob, sections)
        for offset in range(0, len(piece), chunk):
            scatter(offset, piece[offset : offset + chunk])
    assert blob.tobytes() == fed_session.context.state_get(0)
    assert np.array_equal(plan.positions(blob), np.arange(fed_session.n_past))


def test_rebuilt_blob_restores_the_same_next_token_logits(fed_session):
    _, body, recurrent = parts(fed_session)
    layout, cells = parse_kv(body, len(body) - len(recurrent))
    expected = fed_session.last_logits().copy()
    n_past = fed_session.n_past
    fed_session.feed([43])
    after_extra = fed_session.last_logits().copy()
    fed_session.reset()
    assert fed_session.context.state_set(build_blob(0, layout, [cells.to_bytes()], recurrent))
    fed_session.tokens = [0] * n_past
    fed_session.feed([43])
    np.testing.assert_array_equal(fed_session.last_logits(), after_extra)
    assert not np.array_equal(expected, after_extra)


def test_garbage_is_refused():
    with pytest.raises(StateFormatError):
        split_header(b"\x00" * 16)
    with pytest.raises(StateFormatError):
        parse_kv(b"\x01\x00\x00\x00" + b"\xff" * 40, 44)
