"""Counts, progress and an ETA for the header, from the jobs the UI holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eq_tui.present.pace import completed_duration

FINISHED = frozenset({"completed", "pruned", "stuck", "killed", "blocked"})
STATUS_DISPLAY_ORDER = ("running", "launching", "pending", "held", "failed_oom", "completed",
                        "pruned", "stuck", "blocked", "killed")


@dataclass(frozen=True)
class Progress:
    total: int
    completed: int
    finished: int
    counts: Mapping[str, int]
    eta_s: float | None

    @property
    def fraction(self) -> float:
        return self.completed / self.total if self.total else 0.0


def estimate(counts: Mapping[str, int], completed_durations: Iterable[float],
             running_elapsed: list[float]) -> Progress:
    """ETA: work left (a mean completed duration per waiting job, the rest of it per running
    one) spread over the jobs running now. None until one job has completed."""
    total = sum(counts.values())
    finished = sum(counts.get(s, 0) for s in FINISHED)
    durations = list(completed_durations)
    eta: float | None = None
    if durations:
        mean = sum(durations) / len(durations)
        active = counts.get("launching", 0) + counts.get("running", 0)
        waiting = counts.get("pending", 0) + counts.get("failed_oom", 0) + max(
            0, active - len(running_elapsed))
        work = waiting * mean + sum(max(0.0, mean - e) for e in running_elapsed)
        eta = 0.0 if finished == total else work / max(1, len(running_elapsed))
    return Progress(total=total, completed=counts.get("completed", 0), finished=finished,
                    counts=dict(counts), eta_s=eta)


def measure(jobs: Iterable[Mapping[str, Any]], now: float) -> Progress:
    """`estimate` from a list of jobs (the UI keeps the same numbers incrementally)."""
    counts: Counter[str] = Counter()
    durations: list[float] = []
    running_elapsed: list[float] = []
    for job in jobs:
        status = str(job.get("status"))
        counts[status] += 1
        duration = completed_duration(job)
        if duration is not None:
            durations.append(duration)
        elif status in ("running", "launching") and job.get("started") is not None:
            running_elapsed.append(now - float(job["started"]))
    return estimate(counts, durations, running_elapsed)


def ordered_counts(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    known = [(s, counts[s]) for s in STATUS_DISPLAY_ORDER if counts.get(s)]
    others = [(s, n) for s, n in sorted(counts.items()) if s not in STATUS_DISPLAY_ORDER and n]
    return known + others
