"""The parser every ``hearth`` command and sub-command uses: a mistyped flag is reported by the
sub-command it was given to, with that sub-command's usage line and the nearest flag it has.

Plain argparse leaves a sub-command's unknown arguments to the top-level parser, which prints the
top-level usage (``hearth [-h] [--version] {generate,info,…}``) and no hint: the user of
``hearth chat --modle x`` learns neither what ``chat`` takes nor that ``--model`` was meant.
"""

from __future__ import annotations

import argparse
import difflib

# How close a typed flag must be to a real one for "did you mean" (difflib's ratio; 0.6 is its default).
CLOSE_ENOUGH = 0.6


class HearthParser(argparse.ArgumentParser):
    """An argument parser that refuses unknown arguments itself, naming the nearest flag."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(unrecognized(extras, self.flags()))
        return namespace, extras

    def flags(self) -> list[str]:
        """The long flags this parser takes (``--model``, ``--context``, …)."""
        return [flag for action in self._actions for flag in action.option_strings if flag.startswith("--")]


def unrecognized(extras: list[str], flags: list[str]) -> str:
    """``unrecognized arguments: --modle x; did you mean --model?`` (the hint only when one is close)."""
    message = f"unrecognized arguments: {' '.join(extras)}"
    typed = [extra.split("=", 1)[0] for extra in extras if extra.startswith("-")]
    for flag in typed:
        close = difflib.get_close_matches(flag, flags, n=1, cutoff=CLOSE_ENOUGH)
        if close:
            return f"{message}; did you mean {close[0]}?"
    return message
