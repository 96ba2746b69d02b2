"""Which heading a conversation is listed under in the sidebar, by its last activity: Today,
Yesterday, Previous 7 days, Previous 30 days, then its month ("March"; "March 2024" for an earlier
year), as chat apps people know group them. Pure: the caller passes "now", so tests fix it."""

from __future__ import annotations

from datetime import date, datetime

TODAY, YESTERDAY, LAST_7_DAYS, LAST_30_DAYS = "Today", "Yesterday", "Previous 7 days", "Previous 30 days"


def date_group(when: datetime, now: datetime) -> str:
    """The heading for activity at ``when`` seen at ``now`` (both local times; a future time is Today)."""
    days = (now.date() - when.date()).days
    if days <= 0:
        return TODAY
    if days == 1:
        return YESTERDAY
    if days <= 7:
        return LAST_7_DAYS
    if days <= 30:
        return LAST_30_DAYS
    return month_heading(when.date(), now.date())


def month_heading(day: date, today: date) -> str:
    month = day.strftime("%B")
    return month if day.year == today.year else f"{month} {day.year}"


def group_of_timestamp(timestamp: float, now: datetime | None = None) -> str:
    """:func:`date_group` for a stored time (seconds since the epoch), in the local time zone."""
    return date_group(datetime.fromtimestamp(timestamp), now or datetime.now())
