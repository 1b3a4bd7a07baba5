"""Counts and progress for the header, from the jobs the UI holds (the ETA is the engine's)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FINISHED = frozenset({"completed", "pruned", "stuck", "killed", "blocked"})
STATUS_DISPLAY_ORDER = ("running", "launching", "pending", "held", "failed_oom", "completed",
                        "pruned", "stuck", "blocked", "killed")


@dataclass(frozen=True)
class Progress:
    total: int
    completed: int
    finished: int
    counts: Mapping[str, int]

    @property
    def fraction(self) -> float:
        return self.completed / self.total if self.total else 0.0


def counted(counts: Mapping[str, int]) -> Progress:
    """Counts by status, and how many completed and finished (the ETA is the engine's:
    present/queue_eta.py)."""
    return Progress(total=sum(counts.values()), completed=counts.get("completed", 0),
                    finished=sum(counts.get(s, 0) for s in FINISHED), counts=dict(counts))


def measure(jobs: Iterable[Mapping[str, Any]]) -> Progress:
    """`counted` from a list of jobs (the UI keeps the same numbers incrementally)."""
    return counted(Counter(str(job.get("status")) for job in jobs))


def ordered_counts(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    known = [(s, counts[s]) for s in STATUS_DISPLAY_ORDER if counts.get(s)]
    others = [(s, n) for s, n in sorted(counts.items()) if s not in STATUS_DISPLAY_ORDER and n]
    return known + others
