"""Per-request records that cross the process boundary (timings, drafting counters).

They live apart from the code that fills them so the wire protocol, and with it the GUI process,
can use them without importing the inference stack.
"""

from __future__ import annotations

import msgspec


class Timings(msgspec.Struct):
    """Raw timings of one request, in tokens and milliseconds."""

    prompt_n: int = 0
    prompt_ms: float = 0.0
    gen_n: int = 0
    gen_ms: float = 0.0
    ttft_ms: float = 0.0


class DraftStats(msgspec.Struct):
    """Per-request drafting counters (sent in ``Finished``)."""

    kind: str = "off"
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    mean_accepted_len: float = 0.0  # accepted draft tokens per round
    rollbacks: int = 0  # rounds whose rejected tokens were rolled back out of the state
    tree_rounds: int = 0  # rounds that verified several draft paths at once
    side_wins: int = 0  # tree rounds whose accepted tokens came from a path other than the first
    auto_off: bool = False
    reason: str = ""
