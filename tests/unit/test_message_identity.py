"""A message's identity: its fields apart, its whole branch, and the same value wherever it is asked
(the store, the pipe's record, the worker's snapshots)."""

from __future__ import annotations

from engine import protocol as p
from engine.protocol.pipe_transcripts import prefix_digests
from engine.state.snapshot_cursor import stored_identities
from model_store.message_identity import ROOT, branch_identities, message_identity, row_identity


def test_an_identity_names_its_fields_apart_and_its_whole_branch():
    assert message_identity(ROOT, "user", "ab") != message_identity(ROOT, "user", "a", "b")
    assert message_identity(ROOT, "user\x00", "b") != message_identity(ROOT, "user", "\x00b")
    assert message_identity(ROOT, "assistant", "hi", "why") != message_identity(ROOT, "assistant", "hi")
    first, second = branch_identities([("user", "hi", "", ""), ("assistant", "hello", "", "")])
    assert second == message_identity(first, "assistant", "hello")
    assert second != message_identity(message_identity(ROOT, "user", "hi!"), "assistant", "hello")
    assert message_identity(ROOT, "user", "\udcff") != message_identity(ROOT, "user", "\ufffd")  # lone surrogates too


def test_a_tool_part_is_part_of_the_identity_and_its_absence_changes_nothing():
    call = p.ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    calls = message_identity(ROOT, "assistant", "", "", p.tool_part([call], ""))
    assert calls != message_identity(ROOT, "assistant", "")
    assert calls != message_identity(ROOT, "assistant", "", "", p.tool_part([p.ToolCall("call_2", call.name,
                                                                                       call.arguments)], ""))
    result = message_identity(calls, "tool", "Sunny", "", p.tool_part([], "call_1"))
    assert result != message_identity(calls, "tool", "Sunny")
    assert message_identity(ROOT, "user", "hi", "", "") == message_identity(ROOT, "user", "hi")  # as before tools
    assert p.calls_of(p.tool_part([call], "")) == ([call], "")
    assert p.calls_of("{damaged") == ([], "")


def test_the_worker_and_the_store_agree_on_a_tool_conversation():
    call = p.ToolCall("call_1", "get_time", "{}")
    branch = [p.WireMessage("user", "time?", "1"), p.WireMessage("assistant", "", "2", tool_calls=[call]),
              p.WireMessage("tool", "12:00", "3", tool_call_id="call_1")]
    stored = branch_identities([("user", "time?", "", ""), ("assistant", "", "", p.tool_part([call], "")),
                                ("tool", "12:00", "", p.tool_part([], "call_1"))])
    assert stored_identities(branch) == stored


def test_the_worker_computes_the_identity_the_store_keeps_skipping_a_system_prompt_not_stored():
    branch = [p.WireMessage("system", "Be brief."), p.WireMessage("user", "hi", "1"),
              p.WireMessage("assistant", "hello", "2", reasoning="greet")]
    stored = branch_identities([("user", "hi", "", ""), ("assistant", "hello", "greet", "")])
    assert stored_identities(branch) == [None, *stored]


def test_the_pipe_names_a_branch_by_its_identities_and_its_ids():
    one = [p.WireMessage("user", "hi", "1")]
    assert prefix_digests(one) != prefix_digests([p.WireMessage("user", "hi", "9")])
    assert prefix_digests(one) != prefix_digests([p.WireMessage("user", "hi", "1", reasoning="r")])
    assert prefix_digests(one)[0] not in branch_identities([("user", "hi", "", "")])  # the id is part of the pipe's name


def test_a_damaged_row_still_has_an_identity():
    """A migration or a recovery never stops at a row whose columns hold bytes or numbers."""
    assert row_identity(ROOT, "user", "hi", "") == message_identity(ROOT, "user", "hi")
    assert row_identity("\u7d7b\udcff", b"\xffuser", 3, None) == message_identity("\u7d7b\udcff", "\ufffduser", "3", "")
