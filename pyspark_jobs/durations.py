"""How old a gold table's data is, and durations as people read them (the run summary,
the report and its charts)."""

from __future__ import annotations

from datetime import datetime


def human_seconds(seconds: float) -> str:
    """``42 s``, ``3.5 min``, ``2.0 h``, ``12 d``.

    >>> human_seconds(90)
    '1.5 min'
    """
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"


def freshness_seconds(newest_event_ts: str, now: float) -> float:
    """Seconds from a table's newest applied change (an ISO time with offset) to ``now``.

    >>> freshness_seconds("2024-01-01T00:00:00+00:00", 1704067230.5)
    30.5
    """
    return now - datetime.fromisoformat(newest_event_ts).timestamp()
