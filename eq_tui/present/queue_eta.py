"""The queue's ETA: how long it still needs, from the durations of finished jobs of each phase
and, where a job prints its progress ("epoch 3/8", "42% done"), from how far it has come (dated:
by when that progress was seen). So it says something while the first 64 jobs run, before any
has finished.

The engine computes it (engine/tick/queue_eta.py) and publishes it (`queue_eta` events, the
snapshot's `eta_s`/`eta_at`); front ends count it down and compute none. Incremental: `EtaBook`
is told each job record as it changes (each line parsed once, the completed durations summed per
phase, the waiting jobs counted per phase), so an ETA costs one pass over the running jobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import fmean
from typing import Any

from eq_tui.present.pace import DEFAULT_GROUP_OVER, PaceBook

ALL = ""  # the key of the mean over every phase (a phase's key is its name)
# phase, elapsed, fraction[, dated: how long it had run when that fraction was seen]
Running = tuple[str, float, float | None] | tuple[str, float, float | None, float | None]


def estimate_eta(running: Iterable[Running], waiting: Mapping[str, int],
                 means: Mapping[str, float]) -> float | None:
    """Seconds until the queue is done: what the running jobs have left plus the waiting jobs'
    expected durations (`waiting`: how many per phase), spread over as many slots as jobs run
    now. None when nothing is known (no job has finished and none prints its progress)."""
    left: list[float] = []
    slots = 0
    by_progress: dict[str, list[float]] = {}
    for item in running:
        phase, elapsed, fraction = item[0], item[1], item[2]
        # a fraction is as old as its line: the run's length is the time it took to get there
        dated = item[3] if len(item) > 3 else elapsed
        slots += 1
        if fraction and dated is not None and dated > 0:
            total: float | None = dated / fraction
            by_progress.setdefault(phase, []).append(dated / fraction)
            by_progress.setdefault(ALL, []).append(dated / fraction)
        else:
            total = means.get(phase, means.get(ALL))
        if total is not None:
            left.append(max(0.0, total - elapsed))
    progress_means = {phase: fmean(totals) for phase, totals in by_progress.items()}
    work, known = 0.0, bool(left)
    counts = {phase: count for phase, count in waiting.items() if count > 0}
    if not slots and not counts:
        return 0.0
    for phase, count in counts.items():
        for source, key in ((means, phase), (progress_means, phase), (means, ALL),
                            (progress_means, ALL)):
            if key in source:
                work += count * source[key]
                known = True
                break
    if not known:
        return None
    return max(max(left, default=0.0), (sum(left) + work) / max(1, slots))


WAITING = frozenset({"pending", "failed_oom"})


class EtaBook:
    """The figures an ETA needs, kept as job records change: each phase's completed durations
    and waiting jobs, and each running job's dated progress (PaceBook)."""

    def __init__(self) -> None:
        self.paces = PaceBook()
        self._waiting: dict[str, str] = {}  # job id -> its phase, while it waits
        self.waiting_by_group: Counter[str] = Counter()

    def update(self, job_id: str, job: Mapping[str, Any] | None,
               group_over: str = DEFAULT_GROUP_OVER) -> None:
        """A job's record as it is now (None: it is gone)."""
        old = self._waiting.pop(job_id, None)
        if old is not None:
            self.waiting_by_group[old] -= 1
        if job is None:
            self.paces.update(job_id, "", None)
            return
        phase = str(job.get("phase") or "")
        if str(job.get("status")) in WAITING:
            self._waiting[job_id] = phase
            self.waiting_by_group[phase] += 1
        self.paces.update(job_id, phase, job, group_over)

    def eta(self, now: float, more: Mapping[str, int] | None = None) -> float | None:
        """Seconds until the queue is done, as of `now`; None with nothing to go on. `more`:
        jobs per phase not made yet that the queue will run (a search's trials to ask)."""
        means, overall = self.paces.mean_durations()
        if overall is not None:
            means[ALL] = overall
        waiting = self.waiting_by_group + Counter(more) if more else self.waiting_by_group
        return estimate_eta(list(self.paces.dated(now)), waiting, means)


def counted_down(eta_s: float | None, eta_at: float | None, now: float) -> float | None:
    """A published ETA as of `now`: what was left then, less the time since."""
    if eta_s is None:
        return None
    return max(0.0, eta_s - max(0.0, now - (eta_at if eta_at is not None else now)))
