"""What the window shows of tool calls and results, as Markdown: an answer's calls under its text, and a
tool's result in a block of its own, with the tool's name, how long it took, or why it did not run.

Arguments and results are data from a model and from programs: they are shown inside code blocks whose
fence is longer than any run of backticks in them, so nothing in them is read as Markdown or markup.
"""

from __future__ import annotations

import json
import re

from engine import protocol as p

MAX_SHOWN_ARGUMENTS = 400  # characters of a call's arguments shown in the conversation


def _fenced(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _arguments(arguments: str) -> str:
    try:
        shown = json.dumps(json.loads(arguments), ensure_ascii=False, indent=1)
    except ValueError:
        shown = arguments
    return shown if len(shown) <= MAX_SHOWN_ARGUMENTS else shown[:MAX_SHOWN_ARGUMENTS] + " …"


def shown_text(role: str, content: str, tool_part: str) -> str:
    """A message's text as the conversation shows it: an answer's calls after its text, a result fenced."""
    calls, _ = p.calls_of(tool_part)
    if role == "tool":
        return _fenced(content, "text")
    if role != "assistant" or not calls:
        return content
    lines = [content] if content else []
    for call in calls:
        lines.append(f"Calls the tool **{call.name}** with:\n\n" + _fenced(_arguments(call.arguments), "json"))
    return "\n\n".join(lines)


def tool_label(stats: dict) -> str:
    """A result's name line: "Tool: get_weather · 0.4 s", "· failed" or "· did not run" (the result says why)."""
    name = stats.get("tool", "") if isinstance(stats, dict) else ""
    label = f"Tool: {name}" if isinstance(name, str) and name else "Tool result"
    problem = stats.get("problem") if isinstance(stats, dict) else None
    if isinstance(problem, str) and problem:  # the result says what happened
        return f"{label} · did not run" if problem.startswith("You did not allow") else f"{label} · failed"
    seconds = stats.get("seconds") if isinstance(stats, dict) else None
    if not isinstance(seconds, (int, float)):
        return label
    return f"{label} · {seconds:.1f} s" if seconds >= 0.05 else f"{label} · under 0.1 s"
