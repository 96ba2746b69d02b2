"""A turn's answer as the engine's deltas arrive: its text kept delta by delta, its draft spans merged."""

from __future__ import annotations

from app.services.pending_turn import PendingTurn
from engine import protocol as p
from engine.protocol.draft_spans import add_span
from model_store.conversations import Message

N_DELTAS = 4000  # one token each: a long answer


def _turn() -> PendingTurn:
    user = Message("u1", "c1", None, "user", "Tell me a story.", "done", 0.0, {})
    answer = Message("a1", "c1", "u1", "assistant", "", "generating", 0.0, {})
    command = p.AnswerTurn(request_id="turn-1", conversation_id="c1", answer_id="a1",
                           messages=[p.WireMessage("user", user.content, user.id)])
    return PendingTurn("c1", user, answer, command)


def _delta(text: str, spans: list[tuple[int, bool]] | None = None) -> p.TokenDelta:
    return p.TokenDelta(request_id="turn-1", text=text, n_tokens=1, draft_spans=spans or [])


def test_the_text_of_4000_deltas_is_their_concatenation_at_every_read():
    turn = _turn()
    pieces = [f" word{i}" if i % 40 else "\n\nword" for i in range(N_DELTAS)]
    for i, piece in enumerate(pieces):
        assert not turn.feed(_delta(piece))
        if i % 500 == 0:  # read as the GUI's first delta and the CLI's live display do, now and then
            assert turn.text == "".join(pieces[:i + 1])
    assert turn.text == "".join(pieces) and turn.n_deltas == N_DELTAS
    assert turn.feed(p.Finished(request_id="turn-1", finish_reason="stop", timings=p.Timings()))
    assert turn.text == "".join(pieces) and turn.status == "done"


def test_reading_the_text_again_without_a_new_delta_joins_nothing():
    turn = _turn()
    for piece in ("Once", " upon", " a", " time"):
        turn.feed(_delta(piece))
    first = turn.text
    assert turn.text is first, "the second read returns the text the first one built"
    turn.feed(_delta("."))
    assert turn.text == "Once upon a time." and turn.text is turn.text


def test_draft_spans_cover_the_text_merged_by_origin():
    turn = _turn()
    turn.feed(_delta("The sea", [(4, False), (3, True)]))
    turn.feed(_delta(" is", [(3, True)]))
    turn.feed(_delta(" wide."))  # no spans: all of it decoded by the model itself
    turn.feed(_delta("", [(0, True)]))  # an empty delta adds no span
    assert turn.draft_spans == [[4, False], [6, True], [6, False]]
    assert sum(n for n, _ in turn.draft_spans) == len(turn.text)
    assert turn.stats()["draft_spans"] == turn.draft_spans


def test_add_span_merges_a_run_of_the_same_origin_and_skips_nothing_new():
    spans: list[list] = []
    for chars, drafted in ((2, False), (3, False), (0, True), (1, True), (4, False)):
        add_span(spans, chars, drafted)
    assert spans == [[5, False], [1, True], [4, False]]
