"""A model's reasoning on the command line: ``--thinking show|hide|off``.

``show`` prints the reasoning before the answer, dimmed on a terminal; ``hide`` lets the model think
but prints only the answer; ``off`` asks the template not to think at all (``enable_thinking``, where
the model's template has the switch). Unset: shown on a terminal, left out when the output is piped,
so a script reading stdout gets the answer alone. ``--json`` always carries it as ``reasoning``.

Both go through :class:`~app.surfaces.cli.terminal_text.AnswerText`: on a terminal no control character of
the model's (or a remote engine's) acts on it; piped, the answer is the model's text byte for byte.
The reasoning is made safe even when piped, as it always was.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from app.surfaces.cli.terminal_text import AnswerText

THINKING_CHOICES = ("show", "hide", "off")
DIM, RESET = "\x1b[2m", "\x1b[0m"


def add_thinking_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thinking", choices=THINKING_CHOICES, default=None,
                        help="a reasoning model's thinking: show it (dimmed), hide it, or turn it off where the "
                             "model allows (default: shown on a terminal, hidden when piped)")


def enable_thinking(args: argparse.Namespace) -> bool | None:
    """What the request asks of the template: False for ``off``, else the model's (or conversation's) default."""
    return False if getattr(args, "thinking", None) == "off" else None


class ThinkingEcho:
    """Writes an answer's reasoning and text as they stream, the reasoning set apart from the answer."""

    def __init__(self, mode: str | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        tty = self.stream.isatty()
        self.show = mode == "show" or (mode is None and tty)
        self.dim = tty
        self._in_reasoning = False
        self._answer, self._reasoning = AnswerText(tty), AnswerText(True)

    def reasoning(self, text: str) -> None:
        if not self.show or not text:
            return
        if not self._in_reasoning:
            self._in_reasoning = True
            self.stream.write(DIM if self.dim else "")
        self.stream.write(self._reasoning(text))
        self.stream.flush()

    def answer(self, text: str) -> None:
        if text:
            self._end_reasoning()
        self.stream.write(self._answer(text))
        self.stream.flush()

    def close_reasoning(self) -> None:
        """End the reasoning block, and the answer (when the answer has ended, with or without one)."""
        self._end_reasoning()
        self.stream.write(self._answer.end())
        self.stream.flush()

    def _end_reasoning(self) -> None:
        """End the reasoning block (before the answer, or when the answer ends without one)."""
        if self._in_reasoning:
            self._in_reasoning = False
            self.stream.write(self._reasoning.end() + (RESET if self.dim else "") + "\n\n")
            self.stream.flush()
