"""The header's ETA: how long the queue still needs, from the durations of finished jobs of each
phase and, where a job prints its progress ("epoch 3/8", "42%"), from how far it has come. So it
says something while the first 64 jobs run, before any has finished."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import fmean
from typing import Any

from eq_tui.engine import progress_fraction
from eq_tui.tui.progress import completed_duration
from eq_tui.tui.run_view import RunView

ALL = ""  # the key of the mean over every phase


def phase_means(completed: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Mean duration of the completed jobs of each phase, and of all of them under ALL."""
    by_phase: dict[str, list[float]] = {}
    for job in completed:
        duration = completed_duration(job)
        if duration is not None:
            by_phase.setdefault(str(job.get("phase") or ""), []).append(duration)
            by_phase.setdefault(ALL, []).append(duration)
    return {phase: fmean(durations) for phase, durations in by_phase.items()}


def estimate_eta(running: Iterable[Mapping[str, Any]], waiting: Iterable[str],
                 means: Mapping[str, float], now: float) -> float | None:
    """Seconds until the queue is done: what the running jobs have left plus the waiting jobs'
    expected durations (`waiting`: the phase of each), spread over as many slots as jobs run
    now. None when nothing is known (no job has finished and none prints its progress)."""
    left: list[float] = []
    slots = 0
    by_progress: dict[str, list[float]] = {}
    for job in running:
        slots += 1
        phase = str(job.get("phase") or "")
        started = job.get("started")
        elapsed = now - float(started) if started is not None else 0.0
        fraction = progress_fraction(str(job.get("last_line") or ""))
        if fraction and elapsed > 0:
            total: float | None = elapsed / fraction
            by_progress.setdefault(phase, []).append(elapsed / fraction)
            by_progress.setdefault(ALL, []).append(elapsed / fraction)
        else:
            total = means.get(phase, means.get(ALL))
        if total is not None:
            left.append(max(0.0, total - elapsed))
    progress_means = {phase: fmean(totals) for phase, totals in by_progress.items()}
    work, known = 0.0, bool(left)
    waiting_by_phase = Counter(waiting)
    if not slots and not waiting_by_phase:
        return 0.0
    for phase, count in waiting_by_phase.items():
        for source, key in ((means, phase), (progress_means, phase), (means, ALL),
                            (progress_means, ALL)):
            if key in source:
                work += count * source[key]
                known = True
                break
    if not known:
        return None
    return max(max(left, default=0.0), (sum(left) + work) / max(1, slots))


class EtaCache:
    """The ETA of a view, kept cheap for the header's redraw every second and on every tick:
    the completed jobs' durations are summed per phase as jobs complete (or stop being
    completed), not walked again each time."""

    def __init__(self) -> None:
        self._done: dict[str, tuple[str, float]] = {}  # completed job -> phase, duration
        self._sums: dict[str, list[float]] = {}  # phase (and ALL) -> [total, count]
        self._phase: dict[str, str] = {}  # job -> phase, which does not change

    def _count(self, phase: str, duration: float, sign: int) -> None:
        for key in (phase, ALL):
            total = self._sums.setdefault(key, [0.0, 0])
            total[0] += sign * duration
            total[1] += sign

    def _phase_of(self, view: RunView, key: str) -> str:
        phase = self._phase.get(key)
        if phase is None:
            found = view.job(key)
            phase = self._phase[key] = str(found[1].get("phase") or "") if found else ""
        return phase

    def eta(self, view: RunView, now: float) -> float | None:
        completed = set(view.keys_with_status("completed"))
        for key in self._done.keys() - completed:
            self._count(*self._done.pop(key), -1)
        for key in completed - self._done.keys():
            found = view.job(key)
            duration = completed_duration(found[1]) if found else None
            if duration is not None:
                self._done[key] = (self._phase_of(view, key), duration)
                self._count(*self._done[key], 1)
        means = {phase: total / count for phase, (total, count) in self._sums.items() if count}
        running = [found[1] for found in map(view.job, view.keys_with_status(
            "running", "launching")) if found]
        phases = self._phase
        waiting = [phases[key] if key in phases else self._phase_of(view, key)
                   for key in view.keys_with_status("pending", "failed_oom")]
        return estimate_eta(running, waiting, means, now)
