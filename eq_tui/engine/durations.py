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
