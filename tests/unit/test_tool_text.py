"""What the window shows of calls and results: the calls under an answer's text, a result fenced so nothing
in it is read as Markdown, and the result's name line."""

from __future__ import annotations

from app.services.tool_text import shown_text, tool_label
from engine import protocol as p


def test_an_answers_calls_follow_its_text_and_a_result_is_fenced_past_its_own_backticks():
    part = p.tool_part([p.ToolCall("c1", "get_weather", '{"city": "Paris"}')], "")
    shown = shown_text("assistant", "Let me look.", part)
    assert shown.startswith("Let me look.\n\nCalls the tool **get_weather** with:") and '"city": "Paris"' in shown
    result = shown_text("tool", "```\n<b>x</b>", p.tool_part([], "c1"))
    assert result.startswith("````text\n") and result.endswith("\n````")
    assert shown_text("user", "hi", "") == "hi"


def test_a_results_name_line_says_how_long_it_took_or_that_it_failed():
    assert tool_label({"tool": "add", "seconds": 0.42}) == "Tool: add · 0.4 s"
    assert tool_label({"tool": "add", "seconds": 0.01}) == "Tool: add · under 0.1 s"
    assert tool_label({"tool": "add", "problem": "The tool 'add' did not answer."}) == "Tool: add · failed"
    assert tool_label({"tool": "add", "problem": "You did not allow the tool 'add' to run."}) == "Tool: add · did not run"
    assert tool_label({}) == "Tool result"
