"""The client sends each branch's messages once; the worker puts every request back together whole."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import protocol as p
from engine.protocol.pipe_transcripts import KEPT, ReceivedTranscripts, SentTranscripts, UnknownTranscript, prefix_digests


def turn(role: str, content: str, id_: str | None = None) -> p.WireMessage:
    return p.WireMessage(role, content, id_)


def answer(messages: list[p.WireMessage], rid: str = "r") -> p.AnswerTurn:
    return p.AnswerTurn(request_id=rid, conversation_id="c", answer_id="a", messages=messages)


def test_a_digest_names_every_message_before_it():
    branch = [turn("user", "hello", "1"), turn("assistant", "hi", "2"), turn("user", "more", "3")]
    digests = prefix_digests(branch)
    assert len(set(digests)) == 3
    assert prefix_digests(branch[:2]) == digests[:2]
    for changed in (turn("user", "hellO", "1"), turn("system", "hello", "1"), turn("user", "hello", "9"),
                    p.WireMessage("user", "hello", "1", reasoning="r")):
        assert prefix_digests([changed, *branch[1:]])[2] != digests[2]


def test_a_question_after_a_document_carries_only_itself():
    sent, received = SentTranscripts(), ReceivedTranscripts()
    document = turn("user", "a long document " * 5000, "doc")
    read = p.ReadDocument(request_id="d", conversation_id="c", messages=[document])
    assert received.complete(sent.shorten(read)) == read
    question = answer([document, turn("user", "what does it say?", "q")])
    short = sent.shorten(question)
    assert short.known == prefix_digests([document])[0]
    assert short.messages == [turn("user", "what does it say?", "q")]
    assert len(p.encode(short)) < 600 < 80_000 < len(p.encode(question))
    assert received.complete(short) == question


def test_the_same_branch_again_carries_no_message():
    sent, received = SentTranscripts(), ReceivedTranscripts()
    branch = [turn("user", "hello", "1")]
    received.complete(sent.shorten(answer(branch, "first")))
    again = sent.shorten(answer(branch, "regenerate"))
    assert again.messages == [] and again.known
    assert received.complete(again) == answer(branch, "regenerate")


def test_requests_without_messages_pass_unchanged():
    sent = SentTranscripts()
    for command in (p.Ping(request_id="x"), p.Complete(request_id="y", prompt="text")):
        assert sent.shorten(command) is command


def test_an_unknown_digest_is_refused_not_guessed():
    received = ReceivedTranscripts()
    bogus = answer([turn("user", "q")])
    bogus.known = "0" * 32
    with pytest.raises(UnknownTranscript, match="send the whole conversation"):
        received.complete(bogus)


def random_branch(rng: random.Random, pool: list[p.WireMessage]) -> list[p.WireMessage]:
    """A branch made of the pool's messages: shared beginnings, edits, switches between conversations."""
    start = rng.randrange(len(pool))
    return [pool[(start + i * rng.choice((1, 1, 1, 2))) % len(pool)] for i in range(rng.randint(0, 6))]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3 * KEPT))
def test_the_worker_always_rebuilds_what_the_client_meant(seed, n_requests):
    """Both ends forget the same branches at the same time, so a shortened request is always whole again."""
    rng = random.Random(seed)
    pool = [turn(rng.choice(("user", "assistant")), f"message {i}", f"m{i}") for i in range(12)]
    sent, received = SentTranscripts(), ReceivedTranscripts()
    for i in range(n_requests):
        kind = rng.choice(p.CARRIES_BRANCH)
        branch = random_branch(rng, pool)
        match kind:
            case p.Chat:
                command = p.Chat(request_id=f"r{i}", messages=branch)
            case p.AnswerTurn:
                command = answer(branch, f"r{i}")
            case _:
                command = kind(request_id=f"r{i}", conversation_id="c", messages=branch)
        short = sent.shorten(command)
        assert len(short.messages) <= len(branch)
        assert received.complete(p.decode_command(p.encode(short))) == command


def test_frames_the_client_did_not_record_do_not_make_the_worker_forget_what_it_names():
    sent, received = SentTranscripts(), ReceivedTranscripts()
    named = [turn("user", "the conversation the client comes back to", "keep")]
    received.complete(sent.shorten(answer(named, "first")))
    for i in range(KEPT - 1):  # the client's record: still full of what it sent
        received.complete(sent.shorten(answer([turn("user", f"other {i}", f"o{i}")], f"o{i}")))
    for i in range(KEPT // 2):  # raw frames that only the worker saw
        received.complete(answer([turn("user", f"raw {i}", f"r{i}")], f"raw{i}"))
    back = sent.shorten(answer([*named, turn("user", "again", "again")], "back"))
    assert back.known
    assert received.complete(back) == answer([*named, turn("user", "again", "again")], "back")
