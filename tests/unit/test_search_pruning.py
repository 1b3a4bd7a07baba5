"""A search's reports to Optuna and its pruner's verdicts in the tick (engine/tick/
search_pruning.py), on a real RunContext and the real Optuna journal in tmp_path, no hosts
reached: a step is told once every seed of the trial made it, as their mean, and once; a pruned
trial's running jobs are stopped like early stopping's losers (status pruned, the event) and
those waiting are pruned where they wait; a restarted engine stops the jobs of a trial pruned
before; a trial whose jobs ended has its last reports told, never judged."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from eq_tui.api.events import JobPruned, JobStateChanged
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.early_stop import EarlyStop
from eq_tui.engine.tick.search_pruning import SearchPruning, steps_to_report, trials_of, verdict
from eq_tui.engine.tick.search_trials import SearchTrials
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import EarlyStopSpec
from eq_tui.manifest.search_trials import trial_jobs
from eq_tui.runfiles.search_study import Reported
from tests.support.context_bed import context

TEXT = """
project: p
hosts: [{name: g1}]
goal: {val_acc: max}
EARLY
search: {space: {lr: {low: 0.001, high: 0.1}}, trials: 20, sampler: random, seed: 0}
grid: {seed: [1, 2]}
template: {cmd: "train --lr ${lr} --seed ${seed}"}
jobs: [{id: plain, cmd: train}]
"""
MEDIAN = "early_stop: {metric: val_acc, rule: median}"
MEDIAN_SPEC = EarlyStopSpec(metric="val_acc", goal="max", rule="median")


class Bed:
    def __init__(self, tmp_path: Path, early: str = MEDIAN, text: str = TEXT) -> None:
        manifest = load_manifest_text(text.replace("EARLY", early), "m.yaml")
        self.ctx: RunContext = context(tmp_path, manifest, jobs=[
            JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in manifest.jobs])
        self.stopped: list[str] = []
        self.search = SearchTrials(self.ctx, lambda _job: False)
        self.pruning = SearchPruning(self.ctx, self.search.studies,
                                     EarlyStop(self.ctx, self.stop))
        asyncio.run(self.search.start())
        [self.phase] = [p for p in manifest.phases if p.search is not None]
        self.study = self.search.studies[self.phase.name]
        self.events = self.ctx.bus.subscribe()

    async def stop(self, job: JobState, reason: str) -> None:
        self.stopped.append(job.id)

    def trial(self, *reports: list[float], status: JobStatus = JobStatus.RUNNING) -> int:
        """Ask a trial; its seed jobs, in the ledger with these reports."""
        search = self.phase.search
        assert search is not None
        asked = self.study.ask()
        for spec, made in zip(trial_jobs(search, asked.number, asked.values), reports,
                              strict=True):
            job = JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd, params=dict(spec.params),
                           origin="search", status=status, reports=list(made))
            self.ctx.ledger.jobs[job.id] = job
        return asked.number

    def job(self, number: int, seed: int) -> JobState:
        return self.ctx.ledger.jobs[f"t{number}_seed{seed}"]

    def check(self) -> None:
        asyncio.run(self.pruning.check())

    def told(self) -> dict[int, dict[int, float]]:
        study = optuna.load_study(study_name=self.phase.name, storage=JournalStorage(
            JournalFileBackend(str(self.ctx.run_dir.path / "optuna.journal"))))
        return {t.number: t.intermediate_values for t in study.trials}

    def ops(self) -> int:
        lines = (self.ctx.run_dir.path / "optuna.journal").read_text().splitlines()
        return sum(1 for line in lines if json.loads(line)["op_code"] == 7)

    def pruned_events(self) -> list[JobPruned]:
        out = []
        while not self.events.empty():
            event = self.events.get_nowait()
            if isinstance(event, JobPruned):
                out.append(event)
        return out


def test_steps_to_report_are_those_every_seed_made_as_their_mean() -> None:
    assert steps_to_report([], 0) == []
    two = [[0.25, 0.5, 0.75], [0.75, 1.0]]
    assert steps_to_report(two, 0) == [(1, 0.5), (2, 0.75)]
    assert steps_to_report(two, 1) == [(2, 0.75)]
    assert steps_to_report(two, 2) == []
    assert steps_to_report([[0.25, 0.5], []], 0) == []
    assert steps_to_report([[0.5, 0.625, 0.75]], 1) == [(2, 0.625), (3, 0.75)]


def test_trials_of_groups_a_phases_trial_jobs() -> None:
    def job(id: str, phase: str = "main", origin: str = "search", **params: str) -> JobState:
        return JobState(id=id, phase=phase, cmd="c", params=params, origin=origin)
    jobs = [job("t0_seed1", trial="0"), job("t1", trial="1"), job("t0_seed2", trial="0"),
            job("x", phase="other", trial="0"), job("y", origin="manifest", trial="0"),
            job("z", trial="t"), job("w")]
    grouped = trials_of(jobs, "main")
    assert {n: [j.id for j in js] for n, js in grouped.items()} == {
        0: ["t0_seed1", "t0_seed2"], 1: ["t1"]}


def test_verdict_says_the_pruner_the_value_and_the_median_of_the_others() -> None:
    pruned = verdict(MEDIAN_SPEC, Reported(4, 3, 0.1, (0.9, 0.4, math.nan, 0.5)), seeds=2)
    assert (pruned.step, pruned.value, pruned.seeds, pruned.cutoff, pruned.rivals) == (
        3, 0.1, 2, 0.5, 3)
    assert pruned.reason == ("pruned at report 3 by Optuna's MedianPruner: val_acc 0.1 (mean "
                             "of 2 seeds), the other trials' median there 0.5 (3 trials)")
    alone = verdict(EarlyStopSpec("loss", "min", "hyperband"), Reported(2, 2, 0.7), seeds=1)
    assert (alone.cutoff, alone.rivals) == (0.7, 0)
    assert alone.reason == ("pruned at report 2 by Optuna's HyperbandPruner: loss 0.7, no "
                            "other trial there")


def test_a_step_is_told_once_every_seed_made_it_as_their_mean(tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    number = bed.trial([0.5, 0.75], [0.25])
    bed.ctx.ledger.jobs["plain"].reports = [0.1, 0.2, 0.3]  # no trial: not Optuna's
    bed.check()
    assert bed.told() == {number: {1: 0.375}}
    bed.job(number, 2).reports = [0.25, 0.5]
    bed.check()
    bed.check()
    assert bed.told() == {number: {1: 0.375, 2: 0.625}}
    assert bed.ops() == 2 and bed.stopped == []


def test_a_pruned_trials_jobs_stop_running_and_waiting_alike(tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    good = bed.trial([0.9, 0.9], [0.9, 0.9], status=JobStatus.COMPLETED)
    bed.check()  # its jobs have ended: told, never judged
    bed.study.tell(good, "complete", 0.9)
    bad = bed.trial([0.125], [0.25])
    waiting = bed.job(bad, 2)
    waiting.status = JobStatus.FAILED_OOM  # waits to retry, its reports so far kept
    bed.check()
    assert bed.stopped == [f"t{bad}_seed1"]
    assert bed.job(bad, 1).status is JobStatus.PRUNED and waiting.status is JobStatus.PRUNED
    reason = bed.job(bad, 1).reason or ""
    assert reason.startswith("pruned at report 1 by Optuna's MedianPruner: val_acc 0.1875 (mean "
                             "of 2 seeds)"), reason
    assert waiting.reason == reason
    [event] = bed.pruned_events()
    assert (event.job, event.step, event.value, event.cutoff, event.rule) == (
        f"t{bad}_seed1", 1, 0.1875, 0.9, "median")
    assert bed.told()[bad] == {1: 0.1875}
    bed.check()  # all ended: nothing more
    assert bed.stopped == [f"t{bad}_seed1"]


def test_a_restarted_engine_stops_the_jobs_of_a_trial_pruned_before(tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    good = bed.trial([0.9], [0.9], status=JobStatus.COMPLETED)
    bed.check()
    bed.study.tell(good, "complete", 0.9)
    bad = bed.trial([0.1], [0.1])
    assert bed.study.report(bad, [(1, 0.1)]).pruned_at == 1
    # the verdict is in the journal; the engine died before stopping the jobs
    again = Bed(tmp_path)
    for job in bed.ctx.ledger.jobs.values():
        again.ctx.ledger.jobs[job.id] = job
    again.check()
    assert sorted(again.stopped) == [f"t{bad}_seed1", f"t{bad}_seed2"]
    assert again.ops() == 2  # nothing told again


def test_run_to_end_jobs_and_ended_trials_are_left_alone(tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    good = bed.trial([0.9, 0.9], [0.9, 0.9], status=JobStatus.COMPLETED)
    bed.check()
    bed.study.tell(good, "complete", 0.9)
    ended = bed.trial([0.1, 0.1], [0.1, 0.1], status=JobStatus.COMPLETED)
    bed.check()
    assert bed.told()[ended] == {1: 0.1, 2: 0.1}
    assert bed.job(ended, 1).status is JobStatus.COMPLETED
    kept = bed.trial([0.1], [0.1])
    bed.job(kept, 1).run_to_end = True
    bed.check()
    assert bed.stopped == [f"t{kept}_seed2"]
    assert bed.job(kept, 1).status is JobStatus.RUNNING


def test_a_trial_whose_jobs_are_all_at_their_end_is_told_but_never_judged(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    good = bed.trial([0.9, 0.9], [0.9, 0.9], status=JobStatus.COMPLETED)
    bed.check()
    bed.study.tell(good, "complete", 0.9)
    last = bed.trial([0.1, 0.1], [0.1, 0.1])
    other = bed.trial([0.1, 0.1], [0.1, 0.1])
    # every job of `last` at its end by its lines; `other`'s second seed one epoch short
    for number, seed, line in ((last, 1, "epoch 2/2"), (last, 2, "epoch 2/2"),
                               (other, 1, "epoch 2/2"), (other, 2, "epoch 1/2")):
        job = bed.job(number, seed)
        job.cmd = "train --epochs 2"
        bed.pruning.early_stop._progress_of(job).observe(f"{line} val_acc=0.1", 0.0)
    bed.check()
    assert bed.told()[last] == {1: 0.1, 2: 0.1}
    assert bed.told()[other] == {1: 0.1}  # pruned at its first report
    assert bed.stopped == [f"t{other}_seed1", f"t{other}_seed2"]
    assert bed.job(last, 1).status is bed.job(last, 2).status is JobStatus.RUNNING


def test_no_early_stop_tells_nothing(tmp_path: Path) -> None:
    bed = Bed(tmp_path, early="")
    bed.trial([0.5], [0.5])
    bed.check()
    assert bed.told() == {0: {}}


def test_a_search_phase_after_one_without_a_search_is_still_told(tmp_path: Path) -> None:
    """Pins that a phase with no search (or no early_stop) is skipped, not the end of the look."""
    text = """
project: p
hosts: [{name: g1}]
goal: {val_acc: max}
EARLY
phases:
  - name: prep
    jobs: [{id: prep1, cmd: prep}]
  - name: tune
    search: {space: {lr: {low: 0.001, high: 0.1}}, trials: 4, sampler: random, seed: 0}
    template: {cmd: "train --lr ${lr}"}
"""
    bed = Bed(tmp_path, text=text)
    number = bed.trial([0.5, 0.25])
    bed.check()
    assert bed.told() == {number: {1: 0.5, 2: 0.25}}


def test_a_trial_with_nothing_new_reads_no_journal(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins the step kept after the first look: a trial with no new report costs no Optuna
    call (a journal read per trial per tick otherwise), running or with a seed not started."""
    bed = Bed(tmp_path)
    told = bed.trial([0.5], [0.5])
    unstarted = bed.trial([0.5], [])
    bed.check()
    calls: list[int] = []
    report = bed.study.report

    def counted(number: int, values: list[tuple[int, float]], judge: bool = True) -> Reported:
        calls.append(number)
        return report(number, values, judge)

    monkeypatch.setattr(bed.study, "report", counted)
    bed.check()
    bed.check()
    assert calls == []
    bed.job(told, 1).reports.append(0.5)
    bed.job(told, 2).reports.append(0.5)
    bed.job(unstarted, 2).reports.append(0.5)
    bed.check()
    assert sorted(calls) == [told, unstarted]
    assert bed.told() == {told: {1: 0.5, 2: 0.5}, unstarted: {1: 0.5}}


def test_a_verdict_is_kept_for_a_seed_that_starts_running_after_it(tmp_path: Path) -> None:
    """Pins the kept verdict: a seed being relaunched (launching, its reports kept) when its
    trial is pruned is stopped once it runs, with no new report to bring the verdict back."""
    bed = Bed(tmp_path)
    good = bed.trial([0.9], [0.9], status=JobStatus.COMPLETED)
    bed.check()
    bed.study.tell(good, "complete", 0.9)
    bad = bed.trial([0.1], [0.1])
    relaunched = bed.job(bad, 2)
    relaunched.status = JobStatus.LAUNCHING
    bed.check()
    assert bed.stopped == [f"t{bad}_seed1"] and relaunched.status is JobStatus.LAUNCHING
    relaunched.status = JobStatus.RUNNING
    bed.check()
    assert bed.stopped == [f"t{bad}_seed1", f"t{bad}_seed2"]
    assert relaunched.status is JobStatus.PRUNED


def test_a_waiting_seed_pruned_where_it_waits_drops_its_retry_and_says_why(
        tmp_path: Path) -> None:
    """Pins that a waiting seed of a pruned trial loses its retry time (else it would be
    launched again) and that its status change carries the verdict."""
    bed = Bed(tmp_path)
    good = bed.trial([0.9], [0.9], status=JobStatus.COMPLETED)
    bed.check()
    bed.study.tell(good, "complete", 0.9)
    bad = bed.trial([0.1], [0.1])
    waiting = bed.job(bad, 2)
    waiting.status = JobStatus.FAILED_OOM
    waiting.retry_at = 100.0
    bed.check()
    assert waiting.status is JobStatus.PRUNED and waiting.retry_at is None
    changes = []
    while not bed.events.empty():
        event = bed.events.get_nowait()
        if isinstance(event, JobStateChanged) and event.job == waiting.id:
            changes.append(event)
    [change] = changes
    assert change.new == str(JobStatus.PRUNED) and change.detail == waiting.reason
    assert change.detail.startswith("pruned at report 1 by Optuna's MedianPruner")
