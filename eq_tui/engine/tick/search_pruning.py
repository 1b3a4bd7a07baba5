"""A search's trials under `early_stop:`: their reports go to Optuna as intermediate values, and
Optuna's pruner for the rule (runfiles/search_pruners.py) says which trial stops.

Early stopping reads the reports of every running job (tick/early_stop.py) but judges only the
jobs that are no trial's; a trial's step k is told to Optuna once every job of the trial (one
per grid point: seeds) has made its k-th report, as the mean over them, and never twice (the
journal holds what was told). After each report the pruner judges the trial (as
`trial.should_prune()`); a trial it prunes has its running jobs stopped the way early stopping
stops a loser (status pruned, the same event), those not started are pruned where they wait,
and the trial is told pruned once they have all ended (tick/search_trials.py). A report made when
every job of the trial is at its end is told, never judged. Optuna's writes run in a worker
thread, like asking and telling.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Iterable, Sequence

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.pruning import Pruned, quantile
from eq_tui.engine.tick.early_stop import EarlyStop
from eq_tui.engine.tick.search_trials import ORIGIN
from eq_tui.manifest.model import EarlyStopSpec
from eq_tui.runfiles.search_pruners import pruner_args
from eq_tui.runfiles.search_study import Reported, SearchStudy

Key = tuple[str, int]  # (phase, trial number)


def steps_to_report(reports: Sequence[Sequence[float]], after: int) -> list[tuple[int, float]]:
    """The trial's intermediate values still to tell: each step past `after` that every one of
    its jobs has reported (`reports`: each job's reports, in order), with their mean there."""
    if not reports:
        return []
    reached = min(len(job) for job in reports)
    return [(step, statistics.fmean(job[step - 1] for job in reports))
            for step in range(after + 1, reached + 1)]


def trials_of(jobs: Iterable[JobState], phase: str) -> dict[int, list[JobState]]:
    """A search phase's trial jobs, by trial number."""
    out: dict[int, list[JobState]] = {}
    for job in jobs:
        number = job.params.get("trial")
        if job.phase == phase and job.origin == ORIGIN and number is not None \
                and number.isdigit():
            out.setdefault(int(number), []).append(job)
    return out


def verdict(spec: EarlyStopSpec, reported: Reported, seeds: int) -> Pruned:
    """Optuna's verdict in early stopping's words: the trial's value at the report it was
    pruned at, beside the median of the other trials' values there (what the event carries as
    its cutoff: Optuna's own comparison is the pruner's, see search_pruners.py)."""
    step = reported.pruned_at or 0
    others = [v for v in reported.others if not math.isnan(v)]
    cutoff = quantile(others, 0.5) if others else reported.value
    value = reported.value
    mean = f" (mean of {seeds} seeds)" if seeds > 1 else ""
    there = (f"the other trials' median there {cutoff:.4g} ({len(others)} trials)" if others
             else "no other trial there")
    reason = (f"pruned at report {step} by Optuna's {pruner_args(spec)[0]}: {spec.metric} "
              f"{value:.4g}{mean}, {there}")
    return Pruned(step=step, value=value, seeds=seeds, cutoff=cutoff, rivals=len(others),
                  reason=reason)


class SearchPruning:
    def __init__(self, ctx: RunContext, studies: dict[str, SearchStudy],
                 early_stop: EarlyStop) -> None:
        """`studies`: the search's open studies by phase (SearchTrials.studies, filled as it
        opens them)."""
        self.ctx = ctx
        self.studies = studies
        self.early_stop = early_stop
        self._reported: dict[Key, int] = {}  # the last step in the journal, once read
        self._verdicts: dict[Key, Pruned] = {}

    async def check(self) -> None:
        """Tell each open trial its new intermediate values; stop the jobs of those pruned."""
        ledger = self.ctx.ledger
        for phase in self.ctx.manifest.phases:
            spec = phase.results.early_stop
            study = self.studies.get(phase.name)
            if phase.search is None or spec is None or study is None:
                continue
            study.use_pruner(spec)
            for number, jobs in sorted(trials_of(ledger.jobs.values(), phase.name).items()):
                key = (phase.name, number)
                ended = all(job.status.is_finished for job in jobs)
                pruned = self._verdicts.get(key)
                if pruned is None:
                    pruned = await self._report(key, study, spec, jobs, ended)
                if pruned is not None and not ended:
                    await self._prune(jobs, spec, pruned)

    async def _report(self, key: Key, study: SearchStudy, spec: EarlyStopSpec,
                      jobs: list[JobState], ended: bool) -> Pruned | None:
        """Tell the trial's new steps (its jobs ended: the last ones, read as they ended, before
        the trial is told its value; never judged). The first look at a running trial reads
        the journal: what was told before, a verdict kept there."""
        after = self._reported.get(key)
        new = steps_to_report([job.reports for job in jobs], after or 0)
        if not new and (after is not None or ended):
            return None
        # a trial whose every job is at its end (epoch N of N) is finishing anyway: its last
        # reports are told, never judged, as early stopping never judges a job there
        judge = not ended and not all(self.early_stop.finishing(job) for job in jobs)
        reported = await asyncio.to_thread(study.report, key[1], new, judge)
        self._reported[key] = reported.last_step
        if reported.pruned_at is None:
            return None
        pruned = self._verdicts[key] = verdict(spec, reported, len(jobs))
        return pruned

    async def _prune(self, jobs: list[JobState], spec: EarlyStopSpec, pruned: Pruned) -> None:
        ledger = self.ctx.ledger
        running = []
        for job in jobs:
            if job.run_to_end or job.status.is_finished:
                continue  # run_to_end: a person said so (a retry of a pruned job)
            if job.status == JobStatus.RUNNING:
                running.append(job)
            elif not job.status.is_active:  # never started, or waits to retry: never will
                ledger.update(job, retry_at=None, reason=pruned.reason)
                ledger.set_status(job, JobStatus.PRUNED, detail=pruned.reason)
        await asyncio.gather(*(self.early_stop.prune(job, spec, pruned) for job in running))
