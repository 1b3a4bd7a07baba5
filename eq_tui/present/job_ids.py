"""Job ids in a sentence: the first few, then how many more."""

from __future__ import annotations


def jobs_text(jobs: tuple[str, ...], most: int = 4) -> str:
    shown = ", ".join(jobs[:most])
    more = len(jobs) - most
    return f"{shown} and {more} more" if more > 0 else shown
