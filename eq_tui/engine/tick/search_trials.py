"""Searches in the tick: each phase with a `search:` asks Optuna for a trial when there is room
for its jobs, adds them like jobs added at run time (placed, packed, claimed, retried like any
other), and tells Optuna the trial's value once they have all ended and their metrics are in.

What was asked and told lives in the study's journal (runfiles/search_study.py); the trial's
jobs live in the ledger like any run-time job. So after a kill -9 the journal says which trials
are open: their jobs, if the state file has them, are adopted like any job; if the engine died
between asking and saving, they are made again from the journal's parameters. None is asked
twice, and a trial whose jobs ended while no engine ran is told at the first tick.

Optuna's writes take its journal's file lock and wait for it (30 s before Optuna takes over a
lock whose holder died), so asking, telling and opening run in a worker thread: the event loop
never waits on the lock. A lock left by a killed engine is cleared when the study is opened.

The rules (how a trial ended, how much room there is) are the pure functions below.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eq_tui.api.events import JobAdded
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.job_specs import spec_to_json
from eq_tui.engine.tick.search_live import asks_nothing
from eq_tui.manifest.model import JobSpec, PhaseSpec, SearchSpec
from eq_tui.manifest.search_trials import trial_jobs
from eq_tui.runfiles.search_study import Outcome, SearchStudy, clear_stale_lock, journal_path

ORIGIN = "search"


@dataclass(frozen=True)
class Ending:
    outcome: Outcome
    value: float | None = None


def trial_ending(jobs: list[JobState], metric: str) -> Ending | None:
    """How a trial ended, from its jobs (one per grid point), or None while one has not.

    Every job completed with the metric: the mean of their values. One stuck, killed or
    blocked: failed. Otherwise, one pruned: pruned. Completed without the metric: failed."""
    if not jobs or not all(job.status.is_finished for job in jobs):
        return None
    if any(job.status.needs_person for job in jobs):
        return Ending("fail")
    if any(job.status is JobStatus.PRUNED for job in jobs):
        return Ending("pruned")
    values = [job.metrics.get(metric) for job in jobs]
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) != len(jobs):
        return Ending("fail")
    return Ending("complete", statistics.fmean(numbers))


def room_for(gpus: int, active: int, waiting: int) -> int:
    """Jobs that could start now beyond those already waiting: free GPUs (at least one when
    nothing waits, so a search on hosts not probed yet still starts)."""
    free = max(0, gpus - active) - waiting
    return max(free, 1 if waiting == 0 else 0)


def gpu_hours(jobs: Iterable[JobState], now: float) -> float:
    """What the trials' attempts have held: each attempt's GPUs for its time."""
    seconds = 0.0
    for job in jobs:
        for attempt in job.history:
            if attempt.start is not None:
                end = attempt.end if attempt.end is not None else now
                seconds += max(0.0, end - attempt.start) * max(1, len(attempt.gpus))
    return seconds / 3600.0


class SearchTrials:
    def __init__(self, ctx: RunContext, metrics_pending: Callable[[JobState], bool]) -> None:
        """`metrics_pending(job)`: its ended attempt's metrics are still being read."""
        self.ctx = ctx
        self.metrics_pending = metrics_pending
        self.studies: dict[str, SearchStudy] = {}
        self._told: set[tuple[str, int]] = set()

    @property
    def searches(self) -> list[tuple[PhaseSpec, SearchSpec]]:
        return [(p, p.search) for p in self.ctx.manifest.phases if p.search is not None]

    async def start(self) -> None:
        """Open the studies; make again the jobs of open trials the ledger lacks."""
        run_dir = self.ctx.run_dir.path
        if self.searches and clear_stale_lock(run_dir):
            self.ctx.bus.alert("info", f"search: removed {journal_path(run_dir).name}'s lock, "
                               "left by an engine killed while writing it")
        for phase, search in self.searches:
            study = await asyncio.to_thread(SearchStudy, run_dir, phase.name, search,
                                            phase.results.early_stop)
            self.studies[phase.name] = study
            open_trials = study.open_trials()
            # told by an engine before: their jobs' metrics, if still awaited, hold nothing up
            self._told |= {(phase.name, number) for number in range(study.asked())} - {
                (phase.name, trial.number) for trial in open_trials}
            for trial in open_trials:
                for spec in trial_jobs(search, trial.number, trial.values):
                    if spec.id not in self.ctx.ledger.jobs:
                        self._add(spec)

    async def step(self) -> None:
        """Tell the trials that ended, then ask as many as there is room for (the first time,
        after the ledger is restored: open trials' jobs are adopted or made first)."""
        if not self.studies:
            await self.start()
        for phase, search in self.searches:
            study = self.studies[phase.name]
            by_trial = self._trial_jobs(phase.name)
            pending = False
            for number, jobs in sorted(by_trial.items()):
                if (phase.name, number) in self._told:
                    continue
                if any(self.metrics_pending(job) for job in jobs):
                    pending = True  # a result about to be known: ask once Optuna has it
                    continue
                ending = trial_ending(jobs, search.metric)
                if ending is not None:
                    await asyncio.to_thread(study.tell, number, ending.outcome, ending.value)
                    self._told.add((phase.name, number))
            if not pending:
                await self._ask(phase, search, study, by_trial)

    async def _ask(self, phase: PhaseSpec, search: SearchSpec, study: SearchStudy,
             by_trial: dict[int, list[JobState]]) -> None:
        if not self._ready(phase) or asks_nothing(self.ctx, phase.name):
            return
        per_trial = _points(search)
        jobs = [job for trial in by_trial.values() for job in trial]
        waiting = sum(1 for job in jobs if job.status.is_waiting)
        room = room_for(self._gpus(), self._active(), waiting)
        while room >= per_trial or (room > 0 and waiting == 0):
            if not self._may_ask(search, study, jobs):
                return
            trial = await asyncio.to_thread(study.ask)
            for spec in trial_jobs(search, trial.number, trial.values):
                self._add(spec)
            room -= per_trial
            waiting += per_trial

    def _may_ask(self, search: SearchSpec, study: SearchStudy, jobs: list[JobState]) -> bool:
        if search.trials is not None and study.asked() >= search.trials:
            return False
        return search.gpu_hours is None or gpu_hours(jobs, self.ctx.clock()) < search.gpu_hours

    def done(self) -> bool:
        """Every search has asked all it will and been told how each trial ended."""
        for phase, search in self.searches:
            study = self.studies.get(phase.name)
            if study is None:
                return False
            jobs = [job for trial in self._trial_jobs(phase.name).values() for job in trial]
            if study.open_trials():
                return False
            # not ready: its dependencies run (the ledger is not finished either) or one
            # needs a person and blocks it, so it asks nothing more
            if self._ready(phase) and self._may_ask(search, study, jobs):
                return False
        return True

    def _ready(self, phase: PhaseSpec) -> bool:
        """Its dependencies' jobs have all ended well (or it runs whatever they did)."""
        for job in self.ctx.ledger.jobs.values():
            if job.phase in phase.depends_on:
                if not job.status.is_finished:
                    return False
                if job.status.needs_person and phase.on_dependency_failure == "block":
                    return False
        return True

    def _trial_jobs(self, phase: str) -> dict[int, list[JobState]]:
        out: dict[int, list[JobState]] = {}
        for job in self.ctx.ledger.jobs.values():
            if job.phase != phase or job.origin != ORIGIN:
                continue
            number = job.params.get("trial")
            if number is not None and number.isdigit():
                out.setdefault(int(number), []).append(job)
        return out

    def _gpus(self) -> int:
        total = 0
        for record in self.ctx.hosts.values():
            if record.snapshot is not None and record.stopped is None:
                total += len(record.snapshot.gpus) - len(record.quarantined)
        return total

    def _active(self) -> int:
        return sum(1 for job in self.ctx.ledger.jobs.values() if job.status.is_active)

    def _add(self, spec: JobSpec) -> None:
        ctx = self.ctx
        now = ctx.clock()
        if spec.id in ctx.ledger.jobs:  # a job added by hand took the trial job's id
            ctx.bus.alert("warning", f"search: job id {spec.id} is taken; the trial runs "
                          "without that job", job=spec.id)
            return
        job = JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd, priority=spec.priority,
                       params=dict(spec.params), origin=ORIGIN, spec=spec_to_json(spec))
        ctx.bus.publish(JobAdded(project=ctx.project, at=now, job=spec.id, phase=spec.phase,
                                 cmd=spec.cmd, origin=ORIGIN, source=None, by="search",
                                 spec=spec_to_json(spec)))
        ctx.ledger.add_job(job, spec)


def _points(search: SearchSpec) -> int:
    count = 1
    for _, values in search.grid:
        count *= len(values)
    return count
