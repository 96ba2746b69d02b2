"""API requests mapped onto stored branches (a real SQLite store, no engine): a request that
continues an earlier one walks its branch and adds only what is new; other conversations stay apart;
the least recently used go, with their messages, beyond the limit."""

from __future__ import annotations

import pytest

from app.surfaces.serve import api_conversations as api
from app.surfaces.serve.chat_messages import ApiMessage as T
from app.services.turn import TurnOptions
from engine import protocol as p
from app.engine_clients.client import prepare_database
from model_store.after_crash import open_conversation_store
from model_store.db import StoreError, database_path

OPTIONS = TurnOptions(sampling=p.SamplingSpec(temperature=0), max_tokens=8)


@pytest.fixture
def served(tmp_path):
    prepare_database(tmp_path)
    return api.ApiConversations(open_conversation_store(database_path(tmp_path)))


def answered(served, turns, text):
    turn = served.begin(turns, OPTIONS, ["END"], "default")
    turn.feed(p.TokenDelta(request_id=turn.command.request_id, text=text, n_tokens=2))
    turn.feed(p.Finished(request_id=turn.command.request_id, finish_reason="stop", timings=p.Timings()))
    return served.finish(turn)


def test_a_continued_conversation_adds_only_its_new_message_to_the_same_branch(served):
    first = [T("system", "Be brief."), T("user", "Capital of France?")]
    one = answered(served, first, "Paris.")
    assert one.command.stop == ["END"] and [m.role for m in one.command.messages] == ["system", "user"]
    two = served.begin([*first, T("assistant", "Paris."), T("user", "And Italy?")], OPTIONS, [], "default")
    assert two.conversation_id == one.conversation_id
    ids = [m.id for m in two.command.messages]
    assert ids[:3] == [m.id for m in one.command.messages] + [one.answer.id]  # the answer's snapshot lies there
    assert [m.content for m in two.command.messages] == ["Be brief.", "Capital of France?", "Paris.", "And Italy?"]


def test_an_answer_the_client_changed_starts_a_branch_beside_it(served):
    first = [T("user", "Capital of France?")]
    one = answered(served, first, "Paris.")
    edited = served.begin([*first, T("assistant", "PARIS"), T("user", "And Italy?")], OPTIONS, [], "default")
    assert edited.conversation_id == one.conversation_id
    assert edited.command.messages[0].id == one.command.messages[0].id
    assert edited.command.messages[1].id != one.answer.id


def test_other_conversations_stay_apart(served):
    one = answered(served, [T("user", "Capital of France?")], "Paris.")
    other = answered(served, [T("user", "Capital of Spain?")], "Madrid.")
    assert other.conversation_id != one.conversation_id


def test_beyond_the_limit_the_least_recently_used_conversation_goes(served, monkeypatch):
    monkeypatch.setattr(api, "KEPT_CONVERSATIONS", 2)
    oldest = answered(served, [T("user", "one")], "1")
    answered(served, [T("user", "two")], "2")
    answered(served, [T("user", "three")], "3")
    with pytest.raises(StoreError):
        served.store.get(oldest.conversation_id)
    again = served.begin([T("user", "one"), T("assistant", "1"), T("user", "more")], OPTIONS, [], "default")
    assert again.conversation_id != oldest.conversation_id  # read anew, not a dangling branch


def reasoned(served, turns):
    turn = served.begin(turns, OPTIONS, [], "default")
    turn.feed(p.TokenDelta(request_id=turn.command.request_id, text="", reasoning="France... Paris.", n_tokens=3))
    turn.feed(p.TokenDelta(request_id=turn.command.request_id, text="Paris.", n_tokens=2))
    turn.feed(p.Finished(request_id=turn.command.request_id, finish_reason="stop", timings=p.Timings()))
    return served.finish(turn)


def test_an_answer_sent_back_with_its_reasoning_is_continued(served):
    first = [T("user", "Capital of France?")]
    one = reasoned(served, first)
    assert (one.answer.content, one.answer.reasoning) == ("Paris.", "France... Paris.")
    two = served.begin([*first, T("assistant", "Paris.", reasoning="France... Paris."), T("user", "And Italy?")],
                       OPTIONS, [], "default")
    assert two.command.messages[1].id == one.answer.id
    assert two.command.messages[1].reasoning == "France... Paris."


def test_an_answer_sent_back_with_other_reasoning_or_none_is_answered_on_what_was_sent(served):
    """Matched by role and text alone, a later request was answered as if it carried the first
    request's reasoning (issue 53, point 2)."""
    first = [T("user", "Capital of France?")]
    one = reasoned(served, first)
    for sent in ("Rome? No: Paris.", ""):
        other = served.begin([*first, T("assistant", "Paris.", reasoning=sent), T("user", "And Italy?")],
                             OPTIONS, [], "default")
        assert other.conversation_id == one.conversation_id
        assert other.command.messages[0].id == one.command.messages[0].id  # the question is shared
        assert other.command.messages[1].id != one.answer.id
        assert other.command.messages[1].reasoning == sent


def test_a_conversation_is_continued_by_another_server_on_the_same_database(tmp_path):
    prepare_database(tmp_path)
    first = [T("user", "Capital of France?")]
    one = answered(api.ApiConversations(open_conversation_store(database_path(tmp_path))), first, "Paris.")
    again = api.ApiConversations(open_conversation_store(database_path(tmp_path)))
    two = again.begin([*first, T("assistant", "Paris."), T("user", "And Italy?")], OPTIONS, [], "default")
    assert two.conversation_id == one.conversation_id
    assert [m.id for m in two.command.messages[:2]] == [one.user.id, one.answer.id]


def test_a_repeated_question_is_stored_anew_and_never_matched_whole(served):
    """Matched whole, a repeated question stood on the state kept where the first one ended, with
    nothing left to read (issue 50, point 4): the request's last message is always its own."""
    question = [T("system", "Be brief."), T("user", "Capital of France?")]
    one = answered(served, question, "Paris.")
    again = served.begin(question, OPTIONS, [], "default")
    assert again.user.id != one.user.id and again.user.content == "Capital of France?"
    assert again.command.messages[0].id == one.command.messages[0].id  # the system message is shared
    assert [m.content for m in again.command.messages] == ["Be brief.", "Capital of France?"]


def called(served, turns, call):
    turn = served.begin(turns, OPTIONS, [], "default")
    turn.feed(p.Finished(request_id=turn.command.request_id, finish_reason="tool_calls", timings=p.Timings(),
                         tool_calls=[call]))
    return served.finish(turn)


def test_an_answer_that_called_a_tool_is_continued_with_its_result_and_only_with_its_own_call(served):
    first = [T("user", "Weather in Paris?")]
    call = p.ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    one = called(served, first, call)
    assert (one.answer.finish, one.answer.content) == ("tool_calls", "")
    assert p.calls_of(one.answer.tool_part) == ([call], "")
    two = served.begin([*first, T("assistant", "", tool_calls=(call,)), T("tool", "Sunny", tool_call_id="call_1")],
                       OPTIONS, [], "default")
    assert [m.id for m in two.command.messages[:2]] == [one.command.messages[0].id, one.answer.id]
    assert two.command.messages[1].tool_calls == [call]
    assert (two.command.messages[2].role, two.command.messages[2].tool_call_id) == ("tool", "call_1")
    other_call = p.ToolCall("call_1", "get_weather", '{"city": "Rome"}')  # the same text, another call
    three = served.begin([*first, T("assistant", "", tool_calls=(other_call,)),
                          T("tool", "Sunny", tool_call_id="call_1")], OPTIONS, [], "default")
    assert three.command.messages[1].id != one.answer.id
