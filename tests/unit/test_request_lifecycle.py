"""engine.protocol.request_lifecycle: whatever the engine core sends, or fails to send, each request ends with
exactly one event for which ``protocol.ends_request`` is true, and nothing of it follows."""

from __future__ import annotations

import pytest

from engine import protocol as p
from engine.protocol.request_lifecycle import SILENT_END, Requests

DOC = [p.WireMessage("user", "Document: x", "m1")]
COMMANDS = {
    "chat": p.Chat(request_id="r", messages=[p.WireMessage("user", "hi")]),
    "read_document": p.ReadDocument(request_id="r", conversation_id="c", messages=DOC),
    "load_model": p.LoadModel(request_id="r", model="m"),
    "ping": p.Ping(request_id="r"),
}


def run(kind: str, *core_events: p.Event, reason: str = "error") -> list[p.Event]:
    sent: list[p.Event] = []
    requests = Requests(sent.append)
    command = COMMANDS[kind]
    requests.begin(command)
    for event in core_events:
        requests.emit(event)
    requests.end(command, reason)
    return sent


def ends_once(events: list[p.Event]) -> bool:
    return [p.ends_request(e) for e in events] == [False] * (len(events) - 1) + [True]


@pytest.mark.parametrize("kind, closing", [("chat", p.Finished), ("read_document", p.DocumentRead),
                                           ("load_model", p.Error), ("ping", p.Error)])
def test_a_request_that_ended_without_a_word_is_ended_with_an_internal_error(kind, closing):
    events = run(kind)
    assert ends_once(events) and type(events[-1]) is closing
    assert events[0].code == "internal" and events[0].message == SILENT_END


@pytest.mark.parametrize("kind, closing", [("chat", p.Finished), ("read_document", p.DocumentRead)])
def test_an_answers_or_reads_error_is_not_final_and_its_closing_event_follows(kind, closing):
    error = p.Error(code="internal", message="boom", request_id="r")
    events = run(kind, error, reason="cancelled")
    assert [type(e) for e in events] == [p.Error, closing] and not events[0].final
    assert events[1].finish_reason == "cancelled" and ends_once(events)


def test_another_requests_error_ends_it_and_nothing_is_added():
    events = run("load_model", p.ModelLoading(request_id="r", phase="check", fraction=0.0),
                 p.Error(code="model_load_failed", message="no such file", request_id="r"))
    assert [type(e) for e in events] == [p.ModelLoading, p.Error] and ends_once(events)


def test_a_request_that_ended_itself_gets_nothing_more():
    done = p.Finished(request_id="r", finish_reason="stop", timings=p.Timings())
    assert run("chat", done) == [done]


def test_events_of_no_open_request_pass_unchanged():
    sent: list[p.Event] = []
    requests = Requests(sent.append)
    stray = [p.Error(code="bad_frame", message="x"), p.Error(code="internal", message="y", request_id="other")]
    for event in stray:
        requests.emit(event)
    assert sent == stray


@pytest.mark.parametrize("kind, closing", [("chat", p.Finished), ("read_document", p.DocumentRead),
                                           ("load_model", p.Error), ("ping", p.Error)])
def test_a_queued_request_dropped_by_an_abort_ends_cancelled(kind, closing):
    sent: list[p.Event] = []
    Requests(sent.append).drop(COMMANDS[kind])
    assert len(sent) == 1 and type(sent[0]) is closing and p.ends_request(sent[0])
    assert (sent[0].code if closing is p.Error else sent[0].finish_reason) == "cancelled"


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_a_refused_request_ends_as_its_kind_ends(kind):
    events = p.failure_events(kind, "r", "bad_request", "out of range")
    assert ends_once(events) and events[0].code == "bad_request"


def test_an_abort_after_a_stop_drops_the_queue_without_a_word_about_the_stop_itself():
    """The queue may already hold the stop's sentinel (None) when an abort drains it: only requests end."""
    from engine.worker_loop import WorkerLoop

    sent: list[p.Event] = []
    loop = WorkerLoop(sent.append, telemetry_interval_ms=0)
    loop.inbox.queue.put(COMMANDS["chat"])
    loop.inbox.stop(abort=False)  # a drain: its sentinel waits behind the chat
    loop.inbox.stop(abort=True)
    assert [type(e) for e in sent] == [p.Finished] and sent[0].finish_reason == "cancelled"
