"""The header's ETA: how long the queue still needs, from the durations of finished jobs of each
phase and, where a job prints its progress ("epoch 3/8", "42% done"), from how far it has come
(dated: by when that progress was seen).
So it says something while the first 64 jobs run, before any has finished.

Incremental: the run view keeps the figures as records change (each line parsed once, the
completed durations summed per phase, the waiting jobs counted per phase), so an ETA costs one
pass over the running jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from statistics import fmean

from eq_tui.tui.run_view import RunView

ALL = ""  # the key of the mean over every phase (a phase's key is `project/phase`)
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


def view_eta(view: RunView, now: float) -> float | None:
    """The ETA of everything the view holds."""
    means, overall = view.paces.mean_durations()
    if overall is not None:
        means[ALL] = overall
    return estimate_eta(list(view.paces.dated(now)), view.waiting_by_group, means)
