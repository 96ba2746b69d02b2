"""The app's side of a conversation longer than the model can read.

The worker decides where a branch is cut (:mod:`engine.protocol.context_cut`) and says so in the answer's
``Finished.context_cut``; the answer keeps it in its stats (``stats["context_cut"]``), so the cut
lives with the branch it was made on. Each later turn of that branch sends the same cut branch
(:func:`cut_branch`: the one rule, :func:`engine.protocol.context_cut.kept_messages`), so it stands on the
cut turn's snapshot and reads only what is new. Nothing stored is removed; an edit on an earlier
branch has no cut until it needs one.

What the user sees: :func:`cut_notice`, one sentence the window shows above the answer and the CLI
prints on stderr; ``send --json`` and the API say how many messages the model did not read. All of
them count every message the cut leaves out, not only those the turn newly left out (:func:`cut_totals`).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import protocol as p
from engine.protocol.context_cut import kept_messages
from model_store.conversations import Message

CUT_STAT = "context_cut"  # the answer's stats key: {"first_kept_id": ..., "left_out": ...}
WHEN_FULL_LABELS = {  # Settings → Chat's words for each choice (the CLI's --when-full and the API's when_full take the keys)
    "drop-oldest": "leave out the oldest messages",
    "summary": "start a new conversation from a summary",
    "stop": "stop and tell me",
}


def standing_cut(history: Sequence[Message]) -> str | None:
    """The first message kept by the newest cut on this branch (None: the branch was never cut)."""
    for message in reversed(history):
        cut = message.stats.get(CUT_STAT) if isinstance(message.stats, dict) else None
        if isinstance(cut, dict) and isinstance(cut.get("first_kept_id"), str):
            return cut["first_kept_id"]
    return None


def cut_branch(messages: list[p.WireMessage], history: Sequence[Message], pinned: Sequence[str]) -> list[p.WireMessage]:
    """What the model reads of ``messages`` (a branch and its system prompt): cut where this branch was last cut."""
    first_kept = standing_cut(history)
    return messages if first_kept is None else kept_messages(messages, pinned, first_kept)


def left_out(messages: Sequence[p.WireMessage], pinned: Sequence[str], first_kept_id: str) -> int:
    """How many of the branch's messages a cut at ``first_kept_id`` leaves out."""
    return len(messages) - len(kept_messages(messages, pinned, first_kept_id))


def cut_notice(n_left_out: int) -> str:
    """The sentence that says a turn was cut, in the conversation itself."""
    if n_left_out == 1:
        return "The oldest message no longer fits, so the model no longer sees it. Everything is still saved here."
    return (f"The oldest {n_left_out:,} messages no longer fit, so the model no longer sees them. "
            "Everything is still saved here.")


def cut_totals(branch: Sequence[Message], pinned: Sequence[str] = ()) -> list[int]:
    """For each message of ``branch``: how many messages the cut its turn made leaves out in all
    (what the notice above it says, as the CLI and the API count), 0 for a message that made no cut."""
    return [standing_left_out(branch[:i + 1], pinned) if _made_cut(m) else 0 for i, m in enumerate(branch)]


def _made_cut(message: Message) -> bool:
    return isinstance(message.stats, dict) and isinstance(message.stats.get(CUT_STAT), dict)


def standing_left_out(history: Sequence[Message], pinned: Sequence[str] = ()) -> int:
    """How many of ``history``'s messages the newest cut on it leaves out of what the model reads (0: none)."""
    first_kept = standing_cut(history)
    if first_kept is None:
        return 0
    return left_out([p.WireMessage(m.role, m.content, m.id) for m in history], pinned, first_kept)
