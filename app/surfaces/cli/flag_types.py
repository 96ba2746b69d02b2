"""argparse ``type=`` functions for the numeric flags: a number no field can carry is refused as it is read.

An integer above 2**64 used to reach the protocol's encoder and end in an ``OverflowError`` traceback;
now the sub-command's parser refuses it with one usage line naming the flag and its range
(``hearth serve: error: argument --port: must be between 0 and 65535, got 99999``),
exit 2, before any model or engine starts.

Two kinds of flag:

* Flags that become a protocol field (``--max-tokens``, ``--draft-max``, ``--seed``, ``--top-k``): a
  value the encoder can carry but the field's range refuses goes on to ``check_options``
  (app.surfaces.cli.commands), which answers in one line with exit 1 and, with ``--json``, a JSON error naming
  the field; scripts depend on that. Only a value beyond what the encoder can carry stops here, with
  the same range in words. The ranges are the protocol's own (:mod:`engine.protocol`), not restated.
* Flags no command checks (``serve --port``, ``models list --context``): their whole range is checked here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from engine import protocol as p

PORT_RANGE = (0, 65535)  # a TCP port; 0 lets the system pick a free one
# What the protocol's encoder (msgpack) can carry as an integer: beyond it, encoding fails.
ENCODABLE_RANGE = (-2**63, 2**64 - 1)


def _integer(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _named(parse: Callable[[str], int], name: str) -> Callable[[str], int]:
    parse.__name__ = name  # argparse names the type in its "invalid <name> value" messages
    return parse


def integer_between(low: int, high: int, what: str, *, only_beyond_encodable: bool = False) -> Callable[[str], int]:
    """A flag's type: a whole number from ``low`` to ``high``; outside, one line saying the range.
    ``only_beyond_encodable``: refuse only what the encoder cannot carry (the command check refuses the rest)."""

    def parse(text: str) -> int:
        value = _integer(text)
        refused = not ENCODABLE_RANGE[0] <= value <= ENCODABLE_RANGE[1] if only_beyond_encodable \
            else not low <= value <= high
        if refused:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return _named(parse, what)


def sampling_integer(field: str) -> Callable[[str], int]:
    """A flag's type for the sampling setting ``field`` (``seed``, ``top_k``): a value beyond what the
    encoder can carry is refused in the words of :func:`~engine.protocol.sampling_problem`, or, where
    that rule has no upper end (top-k: any count up to the encoder's), as above the encoder's limit."""

    def parse(text: str) -> int:
        value = _integer(text)
        low, high = ENCODABLE_RANGE
        if not low <= value <= high:
            beyond = f"{field.replace('_', '-')} must be at most {high} (2**64 - 1), got {value}"
            raise argparse.ArgumentTypeError(p.sampling_problem(field, value) or beyond)
        return value

    return _named(parse, field)


max_tokens = integer_between(1, p.MAX_TOKENS, "--max-tokens", only_beyond_encodable=True)
draft_max = integer_between(1, p.MAX_DRAFT, "--draft-max", only_beyond_encodable=True)
draft_paths = integer_between(1, p.MAX_DRAFT_PATHS, "--draft-paths")
seed = sampling_integer("seed")
top_k = sampling_integer("top_k")
repeat_last_n = sampling_integer("repeat_last_n")
port = integer_between(*PORT_RANGE, "--port")
context_length = integer_between(1, p.MAX_TOKENS, "--context")
