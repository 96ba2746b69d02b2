"""Which characters of a text came from accepted drafts, as runs: ``[[characters, from a draft], ...]``."""

from __future__ import annotations


def add_span(spans: list[list], chars: int, drafted: bool) -> None:
    """Extend ``spans`` (runs of ``[characters, from an accepted draft]`` covering a text) by ``chars``
    characters: the last run grows when it has the same origin, else a run starts; none for 0. The
    one rule for draft spans, in the engine's text stream, its coalesced deltas and the stored answer."""
    if spans and spans[-1][1] == drafted:
        spans[-1][0] += chars
    elif chars:
        spans.append([chars, drafted])
