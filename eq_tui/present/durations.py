"""Durations for people: 42s, 3m07s, 2h05m."""

from __future__ import annotations


def format_duration(seconds: float | None, missing: str = "") -> str:
    if seconds is None or seconds < 0:
        return missing
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_short(seconds: float | None, missing: str = "") -> str:
    """A rough duration in at most five characters, for estimates: 45s, 12m, 3h10m, 26h."""
    if seconds is None or seconds < 0:
        return missing
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    hours, minutes = divmod(total // 60, 60)
    return f"{hours}h{minutes:02d}m" if hours < 10 else f"{hours}h"
