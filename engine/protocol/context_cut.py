"""When a conversation no longer fits what the model can read: leave its oldest exchanges out.

A turn whose prompt and room for its answer would not fit the longest context the model can have
here (:func:`engine.context.context_growth.longest_possible`) is cut, when its request asks for it
(``when_full="drop-oldest"``): the model reads the leading system message, the pinned messages
(loaded documents) and the newest exchanges, and the oldest exchanges are left out. Nothing stored
changes; only what the model reads.

The cut is decided here only, where the tokens are known, and it is *stable*: it leaves out enough
that the kept part takes at most three quarters of the longest context with the answer's room
(:data:`HEADROOM`), and the answer's ``Finished.context_cut`` names the first message kept. The app
keeps that with the answer and sends the same cut branch on the next turns (:func:`kept_messages`,
the one rule both sides apply), so those turns stand on the cut turn's snapshot and read only their
new messages, until the kept part fills the context again and the next cut is made.

Cuts fall at the start of an exchange (a user message), so the template still sees a user message
first after the system prompt and the documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine import protocol as p

HEADROOM = 4  # a cut leaves the kept part a quarter of the longest context free, so the next turns fit too


def kept_messages(messages: Sequence[p.WireMessage], pinned: Sequence[str],
                  first_kept_id: str) -> list[p.WireMessage]:
    """``messages`` without those a cut at ``first_kept_id`` leaves out: every message before it but
    a leading system message and the ``pinned`` ones. A branch without that message is not cut."""
    index = next((i for i, m in enumerate(messages) if m.id == first_kept_id), None)
    if index is None:
        return list(messages)
    return [m for i, m in enumerate(messages) if i >= index or _stays(messages, i, pinned)]


def _stays(messages: Sequence[p.WireMessage], index: int, pinned: Sequence[str]) -> bool:
    message = messages[index]
    return (index == 0 and message.role == "system") or (message.id is not None and message.id in pinned)


def cut_starts(messages: Sequence[p.WireMessage], pinned: Sequence[str]) -> list[str]:
    """Ids of the messages a cut may start at, oldest first: each exchange's user message after the
    first one that can be left out, up to the last message's exchange."""
    starts = [m.id for i, m in enumerate(messages)
              if m.role == "user" and m.id is not None and not _stays(messages, i, pinned)]
    return starts[1:]


def choose_cut(messages: Sequence[p.WireMessage], pinned: Sequence[str], measure: Callable[[list[p.WireMessage]], int],
               budget: int, limit: int) -> str | None:
    """The first message to keep: the oldest cut start whose kept branch ``measure``s at most
    ``budget`` tokens, else the newest one if it measures at most ``limit``; None: no cut fits."""
    starts = cut_starts(messages, pinned)
    if not starts:
        return None
    low, high = 0, len(starts) - 1  # the kept part shrinks as the start moves on: find the oldest that fits
    newest = measure(kept_messages(messages, pinned, starts[high]))
    if newest > budget:
        return starts[high] if newest <= limit else None
    while low < high:
        middle = (low + high) // 2
        if measure(kept_messages(messages, pinned, starts[middle])) <= budget:
            high = middle
        else:
            low = middle + 1
    return starts[low]


def cut_budget(longest: int, room: int) -> int:
    """Tokens a cut leaves the kept prompt: the longest context less a quarter, less the answer's room."""
    return longest - longest // HEADROOM - room


def cut_report(sent: Sequence[p.WireMessage], kept: Sequence[p.WireMessage], first_kept_id: str) -> p.ContextCut:
    return p.ContextCut(first_kept_id=first_kept_id, left_out=len(sent) - len(kept))
