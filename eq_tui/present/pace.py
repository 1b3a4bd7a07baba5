"""A running job's pace: how far it is, when it should end, and whether it is slow beside the
other jobs of its phase. Pure (no I/O, no UI toolkit), for any front end: `PaceBook` is told
each job record as it changes and answers `pace(key, now)`.

A running job that prints progress f (`progress_line.py`) after running e seconds (from its
attempt's `started`) has e (1 - f) / f left and a projected total of e / f. It is slow when that
projection is more than SLOW_FACTOR times the median of its siblings' figures — the durations
of the completed jobs of its phase and the projections of its other running jobs — and at
least MIN_SIBLINGS siblings have a figure, and its projection has something to stand on: it
has come MIN_FRACTION of the way, or already run as long as its siblings' median (a job's first
percent mostly measures its start-up). Slow is shown, never acted on.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from eq_tui.api.progress_line import progress_fraction

SLOW_FACTOR = 3.0
MIN_SIBLINGS = 2
MIN_FRACTION = 0.1
ACTIVE_STATUSES = frozenset({"running", "launching"})


@dataclass(frozen=True)
class Pace:
    fraction: float
    elapsed_s: float
    remaining_s: float | None  # None until it has made some progress
    projected_s: float | None  # elapsed / fraction: its whole run at this pace
    siblings_median_s: float | None  # None with fewer than MIN_SIBLINGS figures
    siblings: int  # siblings with a figure

    @property
    def slow(self) -> bool:
        median = self.siblings_median_s
        return (self.projected_s is not None and median is not None
                and self.projected_s > SLOW_FACTOR * median
                and (self.fraction >= MIN_FRACTION or self.elapsed_s >= median))


def completed_duration(job: Mapping[str, Any]) -> float | None:
    """How long a completed job ran (its last attempt); None for any other job."""
    started, ended = job.get("started"), job.get("ended")
    if job.get("status") != "completed" or started is None or ended is None:
        return None
    return float(ended) - float(started)


class _Running:
    __slots__ = ("fraction", "group", "line", "started")

    def __init__(self, group: str, started: float | None, line: str) -> None:
        self.group, self.started, self.line = group, started, line
        self.fraction = progress_fraction(line)

    def projection(self, now: float) -> float | None:
        if not self.fraction or self.started is None or now <= self.started:
            return None
        return (now - self.started) / self.fraction


class PaceBook:
    """The figures of every job, kept as records change: each running job's progress (its
    last line parsed once per change), the completed durations of each group (a phase) sorted,
    and — computed once per change and clock reading — the projections of the running ones."""

    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}
        self._group_running: dict[str, set[str]] = {}
        self._done: dict[str, tuple[str, float]] = {}  # key -> group, duration
        self._done_sorted: dict[str, list[float]] = {}
        self._done_sums: dict[str, tuple[float, int]] = {}
        self._version = 0
        self._figures_at: tuple[int, float] | None = None
        self._figures: dict[str, tuple[list[float], dict[str, float]]] = {}

    def update(self, key: str, group: str, job: Mapping[str, Any] | None) -> None:
        """Take in a job's latest record (None: it is gone)."""
        self._update_running(key, group, job)
        duration = completed_duration(job) if job is not None else None
        done = (group, duration) if duration is not None else None
        if self._done.get(key) != done:
            self._count_done(key, done)
            self._version += 1

    def _update_running(self, key: str, group: str, job: Mapping[str, Any] | None) -> None:
        entry = self._running.get(key)
        if job is None or job.get("status") not in ACTIVE_STATUSES:
            if entry is not None:
                del self._running[key]
                self._group_running[entry.group].discard(key)
                self._version += 1
            return
        started = job.get("started")
        started = float(started) if started is not None else None
        line = str(job.get("last_line") or "")
        if entry is not None and entry.group == group:
            changed = entry.started != started
            entry.started = started
            if entry.line != line:  # a new line: parsed once, here
                fraction = progress_fraction(line)
                changed = changed or fraction != entry.fraction
                entry.line, entry.fraction = line, fraction
            if changed:
                self._version += 1
            return
        if entry is not None:
            self._group_running[entry.group].discard(key)
        self._running[key] = _Running(group, started, line)
        self._group_running.setdefault(group, set()).add(key)
        self._version += 1

    def _count_done(self, key: str, done: tuple[str, float] | None) -> None:
        old = self._done.pop(key, None)
        if old is not None:
            durations = self._done_sorted[old[0]]
            del durations[bisect.bisect_left(durations, old[1])]
            total, count = self._done_sums[old[0]]
            self._done_sums[old[0]] = (total - old[1], count - 1)
        if done is not None:
            self._done[key] = done
            bisect.insort(self._done_sorted.setdefault(done[0], []), done[1])
            total, count = self._done_sums.get(done[0], (0.0, 0))
            self._done_sums[done[0]] = (total + done[1], count + 1)

    # ---- reading ---------------------------------------------------------------------------

    def pace(self, key: str, now: float) -> Pace | None:
        """A running job's pace; None for a job that is not running or prints no progress."""
        entry = self._running.get(key)
        if entry is None or entry.fraction is None or entry.started is None:
            return None
        elapsed = max(0.0, now - entry.started)
        figures, own = self._group_figures(entry.group, now)
        mine = own.get(key)  # its projection; None until it has run and made progress
        count = len(figures) - (mine is not None)
        skip = bisect.bisect_left(figures, mine) if mine is not None else len(figures)
        fraction = entry.fraction
        return Pace(fraction=fraction, elapsed_s=elapsed,
                    remaining_s=elapsed * (1 - fraction) / fraction if mine is not None else None,
                    projected_s=mine, siblings_median_s=_median(figures, count, skip),
                    siblings=count)

    def running(self) -> Iterator[tuple[str, float | None, float | None]]:
        """(group, started, fraction) of every running or launching job."""
        for entry in self._running.values():
            yield entry.group, entry.started, entry.fraction

    def mean_durations(self) -> tuple[dict[str, float], float | None]:
        """The mean duration of the completed jobs of each group, and of all of them."""
        means = {group: total / count for group, (total, count) in self._done_sums.items()
                 if count}
        total = sum(t for t, _ in self._done_sums.values())
        count = sum(c for _, c in self._done_sums.values())
        return means, total / count if count else None

    def _group_figures(self, group: str, now: float) -> tuple[list[float], dict[str, float]]:
        """Every figure of a group, sorted, and the running jobs' own."""
        if self._figures_at != (self._version, now):
            self._figures_at, self._figures = (self._version, now), {}
        cached = self._figures.get(group)
        if cached is None:
            own = {}
            for key in self._group_running.get(group, ()):
                projection = self._running[key].projection(now)
                if projection is not None:
                    own[key] = projection
            # two sorted runs: the sort merges them in one pass
            figures = sorted([*self._done_sorted.get(group, ()), *sorted(own.values())])
            cached = self._figures[group] = (figures, own)
        return cached


def _median(values: list[float], count: int, skip: int) -> float | None:
    """The median of sorted `values` less the one at index `skip` (a job's own figure; none is
    left out when skip == len(values)), `count` being how many remain; None with fewer than
    MIN_SIBLINGS."""
    if count < MIN_SIBLINGS:
        return None

    def at(k: int) -> float:
        return values[k if k < skip else k + 1]

    return (at((count - 1) // 2) + at(count // 2)) / 2
