"""Durations as people read them (the run summary, the report and its charts)."""

from __future__ import annotations


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
