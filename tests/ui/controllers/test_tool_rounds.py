"""A tool round in the window, on the scripted engine: the calls an answer makes run (the built-in
calculator, for real), their results are stored and sent back with the tools offered, and the next answer
comes; Stop during a running tool ends the round at once, and its late result is dropped."""

from __future__ import annotations

import threading

from app.services.tools.tool_settings import ToolSettings
from app.services.tools.toolbox import ToolResult
from engine import protocol as p
from tests.fakes.engine_client import answer, call
from tests.helpers.gui import write_settings

SIX_BY_SEVEN = p.ToolCall("call_1", "calculator", '{"expression": "6*7"}')


def test_an_answers_call_runs_and_its_result_is_stored_and_answered(start_scripted, engine):
    write_settings(tools=ToolSettings(enabled=["calculator"], always=["calculator"]))
    engine.script(p.AnswerTurn, call(SIX_BY_SEVEN), answer("It is 42."))
    app = start_scripted()
    app.wait(lambda: bool(app.controller.tool_specs))
    app.send_and_wait("6 times 7?")
    assert [(role, text) for role, text, _ in app.transcript()] == [
        ("user", "6 times 7?"), ("assistant", ""), ("tool", "6*7 = 42"), ("assistant", "It is 42.")]
    first, second = engine.sent(p.AnswerTurn)
    assert [t.name for t in first.template.tools] == ["calculator"] and first.tool_choice.mode == "auto"
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[1].tool_calls == [SIX_BY_SEVEN] and second.messages[2].tool_call_id == "call_1"


def test_stop_while_a_tool_runs_ends_the_round_and_drops_its_late_result(start_scripted, engine):
    write_settings(tools=ToolSettings(enabled=["calculator"], always=["calculator"]))
    engine.script(p.AnswerTurn, call(SIX_BY_SEVEN))
    app = start_scripted()
    app.wait(lambda: bool(app.controller.tool_specs))
    started, release = threading.Event(), threading.Event()

    def slow(_call):  # a tool that takes its time (the toolbox's own run is tested against real servers)
        started.set()
        release.wait(10)
        return ToolResult("42", True)

    app.controller._toolbox.run = slow
    states = []
    app.controller.generating_changed.connect(states.append)
    app.type_and_send("6 times 7?")
    app.wait(started.is_set)
    app.wait(lambda: app.controller.running_tools)
    app.controller.stop()
    assert not app.controller.generating and states[-1] is False
    release.set()
    app.qtbot.wait(200)
    assert len(engine.sent(p.AnswerTurn)) == 1 and [r for r, _, _ in app.transcript()] == ["user", "assistant"]
