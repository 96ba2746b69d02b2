"""What a database recovery did, in the words the window and ``hearth db recover`` both show."""

from __future__ import annotations

from model_store.recovery import Recovery


def recovery_text(recovery: Recovery) -> str:
    """What a recovery did, in a few lines (the GUI shows the same words)."""
    lost = sum(recovery.unreadable.values())
    lines = [f"Recovered {recovery.rows.get('conversations', 0):,} conversations and "
             f"{recovery.rows.get('messages', 0):,} messages into a new {recovery.database.name}"
             + (" (rows on unreadable pages are lost)." if lost else "."),
             f"The damaged file is kept as {recovery.damaged_copy}."]
    lines += [f"Repaired: {repair}." for repair in recovery.repairs]
    return "\n".join(lines)
