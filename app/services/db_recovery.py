"""What a database recovery did, in the words the window and ``hearth db recover`` both show."""

from __future__ import annotations

from model_store.recovery import Recovery


def recovery_text(recovery: Recovery) -> str:
    """What a recovery did, in a few lines (the GUI shows the same words)."""
    lost = _pages_lost(recovery) + recovery.pages.get("cells_unreadable", 0)
    lines = [f"Recovered {recovery.rows.get('conversations', 0):,} conversations and "
             f"{recovery.rows.get('messages', 0):,} messages into a new {recovery.database.name}"
             + (" (rows on unreadable pages are lost)." if lost else "."),
             f"The damaged file is kept as {recovery.damaged_copy}."]
    lines += _damage_lines(recovery)
    lines += [f"Repaired: {repair}." for repair in recovery.repairs]
    return "\n".join(lines)


def _pages_lost(recovery: Recovery) -> int:
    return recovery.pages.get("missing", 0) + sum(recovery.unreadable.values())


def _damage_lines(recovery: Recovery) -> list[str]:
    """What the page reader met that could not be kept, when it met anything."""
    pages, cells = _pages_lost(recovery), recovery.pages.get("cells_unreadable", 0)
    if not (pages or cells):
        return []
    return [f"Lost: {pages:,} of {recovery.pages.get('in_file', 0):,} pages were missing or unreadable, "
            f"and {cells:,} damaged rows could not be read."]
