"""The one error every tool raises: :class:`ToolProblem`, whose message is the sentence the user reads."""

from __future__ import annotations


class ToolProblem(Exception):
    """A tool that could not run or did not finish; the message is one sentence for the user, naming
    the tool, and the model reads the same sentence as the tool's result."""


def seconds(value: float) -> str:
    """A time limit in words: "30 seconds", "1 second", "0.5 seconds"."""
    return f"{value:g} second" + ("" if value == 1 else "s")
