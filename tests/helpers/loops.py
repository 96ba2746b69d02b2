"""When an answer counts as a loop: the one rule that ``tests/bench/bench_loops.py`` counts by and the
tests of the penalties assert with."""

from __future__ import annotations

from collections import Counter

RUN = 8  # tokens in the run that counts as repeated


def loops(tokens: list[int], finish_reason: str) -> bool:
    """The answer ends in a loop: a run of :data:`RUN` tokens three times or more, or the token limit
    reached while repeating (the answer's last :data:`RUN` tokens were already written once before)."""
    runs = Counter(tuple(tokens[i:i + RUN]) for i in range(len(tokens) - RUN + 1))
    if max(runs.values(), default=0) >= 3:
        return True
    return finish_reason == "length" and len(tokens) > RUN and runs[tuple(tokens[-RUN:])] >= 2
