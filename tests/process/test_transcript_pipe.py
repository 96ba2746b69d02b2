"""A real worker is sent each conversation's messages once, and answers as if sent all of them."""

from __future__ import annotations

import msgspec

from app.services.turn import regenerate_turn
from engine import protocol as p
from engine.protocol.framing import frame
from engine.protocol.pipe_transcripts import prefix_digests
from tests.helpers.documents import WORDS
from tests.helpers.snapshot_chat import GREEDY, Chat
from tests.process.conftest import collect, finished

LONG_TEXT = "Please keep these notes: " + " ".join(WORDS[i % len(WORDS)] for i in range(500))


def test_a_question_after_a_long_message_sends_only_itself_and_answers_the_same(tmp_path, smollm2):
    chat = Chat(tmp_path / "data", str(smollm2))
    chat.start_worker()
    try:
        before = chat.client.sent_bytes
        chat.say(LONG_TEXT)
        first_turn_bytes = chat.client.sent_bytes - before
        before = chat.client.sent_bytes
        question = chat.say("Which word came first?")
        second_turn_bytes = chat.client.sent_bytes - before
    finally:
        chat.stop_worker()
    assert first_turn_bytes > len(LONG_TEXT)
    assert second_turn_bytes < 1500, second_turn_bytes  # the question, its answer's id and the settings

    chat.start_worker()  # a new worker was sent nothing: it gets the whole branch
    try:
        again = regenerate_turn(chat.store, chat.client, chat.conversation.id, question.user.id,
                                sampling=GREEDY, max_tokens=24)
        assert chat.client.sent_bytes > len(LONG_TEXT)
    finally:
        chat.stop_worker()
    assert again.finished.token_ids == question.finished.token_ids
    assert again.text == question.text


def test_a_request_built_on_messages_never_sent_is_refused_and_the_worker_goes_on(worker):
    messages = [p.WireMessage("user", "hello")]
    command = p.Chat(request_id="orphan", messages=messages, known=prefix_digests([p.WireMessage("user", "never")])[0])
    worker.send_raw(frame(msgspec.msgpack.encode(command)))
    events = []
    while not events or not isinstance(events[-1], p.Finished):
        event = worker.next_event(30)
        assert event is not None
        if getattr(event, "request_id", None) == "orphan":
            events.append(event)
    errors = [e for e in events if isinstance(e, p.Error)]
    assert [e.code for e in errors] == ["bad_request"]
    assert "send the whole conversation" in errors[0].message
    assert finished(events).finish_reason == "error"
    assert any(isinstance(e, p.Pong) for e in collect(worker, p.Ping(request_id="after")))
