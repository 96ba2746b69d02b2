"""Every request ends with exactly one event that says it ends it (``protocol.ends_request``), whatever
happens inside the worker. An internal error (a bug: injected with the test switch
``HEARTH_TEST_INTERNAL_ERROR``, since no input causes one on purpose) ends an answer with ``Finished``,
a document read with ``DocumentRead`` and any other request with its ``Error``; a client following the
request returns, and the worker goes on serving."""

from __future__ import annotations

import pytest

from engine import protocol as p
from app.engine_clients.client import new_request_id
from app.engine_clients.process_client import ProcessClient
from tests.process.conftest import wait_for

pytestmark = pytest.mark.process

DOCUMENT = [p.WireMessage("user", "Document: the mill by the river was built in 1820.", "m1")]
REQUESTS = {  # the worker's kind of request -> (the request, the event that ends it after an error)
    "complete": (lambda rid: p.Complete(request_id=rid, prompt="The mill", max_tokens=4), p.Finished),
    "chat": (lambda rid: p.Chat(request_id=rid, messages=[p.WireMessage("user", "Hello")], max_tokens=4), p.Finished),
    "answer_turn": (lambda rid: p.AnswerTurn(request_id=rid, conversation_id="c1", answer_id="m3", max_tokens=4,
                                             messages=[*DOCUMENT, p.WireMessage("user", "When?", "m2")]), p.Finished),
    "read_document": (lambda rid: p.ReadDocument(request_id=rid, conversation_id="c1", messages=DOCUMENT),
                      p.DocumentRead),
    "open_conversation": (lambda rid: p.OpenConversation(request_id=rid, conversation_id="c1", messages=DOCUMENT),
                          p.Error),
    "measure_text": (lambda rid: p.MeasureText(request_id=rid, text="the mill by the river"), p.Error),
    "ping": (lambda rid: p.Ping(request_id=rid), p.Error),
}


@pytest.mark.parametrize("kind", list(REQUESTS))
def test_an_internal_error_ends_the_request_with_one_closing_event(hearth_home, hybrid_tiny, kind):
    client = ProcessClient(env={"HEARTH_HOME": str(hearth_home), "HEARTH_TEST_INTERNAL_ERROR": kind})
    client.start()
    try:
        client.load_model(str(hybrid_tiny), timeout=120)
        make, closing = REQUESTS[kind]
        rid = new_request_id("t")
        events = list(client.stream(make(rid), timeout=60))  # a request that never ends times out here
        assert [type(e) for e in events][-1] is closing, events
        errors = [e for e in events if isinstance(e, p.Error)]
        assert len(errors) == 1 and errors[0].code == "internal" and "injected" in errors[0].message
        assert [p.ends_request(e) for e in events] == [False] * (len(events) - 1) + [True], events
        client.send(p.UnloadModel(request_id="after"))  # the worker goes on serving, and says no more of rid
        while (event := wait_for(client, (p.ModelUnloaded, p.Error, p.Finished, p.DocumentRead))) is not None:
            assert getattr(event, "request_id", None) != rid, event
            if isinstance(event, p.ModelUnloaded):
                break
    finally:
        client.close(mode="abort", timeout=5)
