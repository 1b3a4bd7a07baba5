"""The search's engine side (engine/tick/search_trials.py, SearchTrials) on a real RunContext and
the real Optuna journal in tmp_path, no hosts reached: how many trials are asked for the room
there is (GPUs, what waits, what runs, the grid's points, `trials:`, the GPU-hours budget), none
while paused or while the phases it depends on have not ended well, what is told and when, when
done() holds, a trial job's id already taken, and a restarted engine adopting open trials."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from eq_tui.api.events import Event, JobAdded
from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.job_specs import spec_to_json
from eq_tui.engine.tick.search_trials import SearchTrials
from eq_tui.hosts.base import GpuReading, HostSnapshot
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.search_trials import trial_jobs
from tests.support.context_bed import Clock, context

HOSTS = "hosts: [{name: g1}, {name: g2}, {name: g3}, {name: g4}]\n"


def flat(trials: str = "trials: 20", grid: str = "", hosts: str = HOSTS) -> str:
    return f"""
project: p
goal: {{val_acc: max}}
{hosts}search:
  space: {{lr: {{low: 0.001, high: 0.1, log: true}}}}
  {trials}
  sampler: random
  seed: 0
{grid}template: {{cmd: "train --lr ${{lr}}", priority: 3}}
"""


def staged(failure: str = "block", trials: int = 3) -> str:
    return f"""
project: p
goal: {{val_acc: max}}
phases:
  - name: prep
    jobs: [{{id: prep1, cmd: prep a}}, {{id: prep2, cmd: prep b}}]
  - name: tune
    depends_on: prep
    on_dependency_failure: {failure}
    search: {{space: {{lr: {{low: 0.1, high: 0.9}}}}, trials: {trials}}}
    template: {{cmd: "train --lr ${{lr}}"}}
"""


def bed(tmp_path: Path, text: str, gpus: dict[str, int] | None = None,
        clock: Clock | None = None) -> tuple[RunContext, SearchTrials, list[str]]:
    """A context over `text` (its ledger holding the manifest's jobs), `gpus` GPUs probed per
    host; and the ids metrics_pending was asked about."""
    tmp_path.mkdir(exist_ok=True)
    manifest = load_manifest_text(text, "m.yaml")
    ctx = context(tmp_path, manifest, clock=clock,
                  jobs=[JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in manifest.jobs])
    for name, count in (gpus or {}).items():
        ctx.hosts[name].snapshot = HostSnapshot(name, True, 0.0, gpus=tuple(
            GpuReading(i, f"GPU-{i}", "Sim", 0, 80000, 0) for i in range(count)))
    asked: list[str] = []

    def pending(job: JobState) -> bool:
        asked.append(job.id)
        return job.id in PENDING
    PENDING.clear()
    return ctx, SearchTrials(ctx, pending), asked


PENDING: set[str] = set()


def trial_ids(ctx: RunContext) -> list[str]:
    return [j.id for j in ctx.ledger.jobs.values() if j.origin == "search"]


def end(ctx: RunContext, job_id: str, status: JobStatus = JobStatus.COMPLETED,
        value: float | None = 0.5) -> None:
    job = ctx.ledger.jobs[job_id]
    job.status = status
    job.metrics = {"val_acc": value} if value is not None else {}


async def test_trials_asked_fill_the_free_gpus_of_hosts_probed_up_and_not_stopped(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(), gpus={"g1": 4, "g2": 2, "g3": 4})
    ctx.hosts["g1"].quarantined = {3}
    ctx.hosts["g3"].stopped = "disk full"  # g4: never probed
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1", "t2", "t3", "t4"]  # 3 + 2 GPUs
    await trials.step()  # all five wait: no room
    assert trials.studies["main"].asked() == 5


async def test_waiting_and_active_jobs_take_room_and_room_equal_to_a_trial_asks_one(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(), gpus={"g1": 2})
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"]
    ctx.ledger.jobs["t0"].status = JobStatus.RUNNING
    ctx.hosts["g1"].snapshot = HostSnapshot("g1", True, 0.0, gpus=tuple(
        GpuReading(i, f"GPU-{i}", "Sim", 0, 80000, 0) for i in range(6)))
    await trials.step()  # 6 GPUs - 1 running - 1 waiting: 4 more
    assert trial_ids(ctx) == ["t0", "t1", "t2", "t3", "t4", "t5"]
    for job_id in ("t1", "t2", "t3", "t4"):
        ctx.ledger.jobs[job_id].status = JobStatus.RUNNING
    await trials.step()  # 6 - 5 running - 1 waiting: none
    assert len(trial_ids(ctx)) == 6
    ctx.ledger.jobs["t5"].status = JobStatus.LAUNCHING
    ctx.ledger.jobs["t0"].status = JobStatus.COMPLETED
    await trials.step()  # 6 - 5 active, nothing waits: room 1
    assert len(trial_ids(ctx)) == 7


async def test_a_grid_trial_is_asked_when_its_points_fit_or_nothing_waits(tmp_path: Path) -> None:
    grid = "grid: {seed: [1, 2], wd: [0, 1, 2]}\n"
    text = flat(trials="trials: 5", grid=grid).replace("${lr}", "${lr} ${seed} ${wd}")
    ctx, trials, _ = bed(tmp_path, text)  # no host probed: room for one job, so one trial
    await trials.step()
    assert trial_ids(ctx) == ["t0_seed1_wd0", "t0_seed1_wd1", "t0_seed1_wd2", "t0_seed2_wd0",
                              "t0_seed2_wd1", "t0_seed2_wd2"]
    assert ctx.ledger.jobs["t0_seed2_wd1"].params["trial"] == "0"

    ctx, trials, _ = bed(tmp_path / "b", text, gpus={"g1": 7})
    await trials.step()  # 7 free: one trial of 6, then 1 left while 6 wait
    assert len(trial_ids(ctx)) == 6

    ctx, trials, _ = bed(tmp_path / "c", text, gpus={"g1": 8, "g2": 5})
    await trials.step()  # 13 free: two trials, 1 left
    assert len(trial_ids(ctx)) == 12
    for job_id in trial_ids(ctx)[:2]:
        ctx.ledger.jobs[job_id].status = JobStatus.RUNNING
    ctx.hosts["g2"].snapshot = None
    ctx.hosts["g1"].snapshot = HostSnapshot("g1", True, 0.0, gpus=tuple(
        GpuReading(i, f"GPU-{i}", "Sim", 0, 80000, 0) for i in range(19)))
    await trials.step()  # 19 - 2 running - 10 waiting = 7: one more trial, then 1 left
    assert len(trial_ids(ctx)) == 18


async def test_a_two_point_trial_beside_one_waiting_asks_only_what_fits(tmp_path: Path) -> None:
    text = flat(grid="grid: {seed: [1, 2]}\n").replace("${lr}", "${lr} ${seed}")
    ctx, trials, _ = bed(tmp_path, text, gpus={"g1": 3})
    await trials.step()  # 3 free: one trial (2), then 1 left: less than a trial, 2 wait
    assert trial_ids(ctx) == ["t0_seed1", "t0_seed2"]
    ctx.hosts["g1"].snapshot = HostSnapshot("g1", True, 0.0, gpus=tuple(
        GpuReading(i, f"GPU-{i}", "Sim", 0, 80000, 0) for i in range(5)))
    await trials.step()  # 5 - 2 waiting = 3: one trial, then 1 left
    assert len(trial_ids(ctx)) == 4


async def test_trials_stop_at_the_count_and_done_holds_once_all_are_told(tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 2"), gpus={"g1": 4})
    assert not trials.done()  # not started
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"]
    study = trials.studies["main"]
    assert study.asked() == 2 and not trials.done()  # open trials
    end(ctx, "t0")
    end(ctx, "t1", JobStatus.KILLED, None)
    await trials.step()
    assert study.counts() == {"complete": 1, "fail": 1} and study.asked() == 2
    assert trials.done()


async def test_done_waits_while_another_trial_may_be_asked(tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 2"))
    await trials.step()
    assert trial_ids(ctx) == ["t0"]
    end(ctx, "t0", JobStatus.KILLED, None)
    PENDING.add("t0")
    ctx.paused = True
    await trials.step()  # the metrics are being read: not told
    assert trials.studies["main"].counts() == {"running": 1} and not trials.done()
    PENDING.clear()
    await trials.step()  # told; paused: t1 not asked, and done() knows it will be
    assert trials.studies["main"].counts() == {"fail": 1}
    assert trial_ids(ctx) == ["t0"] and not trials.done()
    ctx.paused = False
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"]


async def test_each_trial_is_told_once_when_its_jobs_and_metrics_are_in(tmp_path: Path) -> None:
    ctx, trials, asked = bed(tmp_path, flat(trials="trials: 3"), gpus={"g1": 3})
    await trials.step()
    study = trials.studies["main"]
    end(ctx, "t0", value=0.25)
    await trials.step()
    assert study.state(0) == "complete"
    asked.clear()
    end(ctx, "t1", value=0.75)
    end(ctx, "t2", value=0.5)
    PENDING.add("t1")
    await trials.step()  # t1's metrics still read: t1 waits, t2 is told past it
    assert (study.state(1), study.state(2)) == ("running", "complete")
    assert "t0" not in asked  # a told trial is not looked at again
    PENDING.clear()
    await trials.step()
    assert study.counts() == {"complete": 3} and trials.done()
    values = {t.number: t.value for t in study._study.get_trials()}
    assert values == {0: 0.25, 1: 0.75, 2: 0.5}


async def test_the_gpu_hours_budget_stops_asking_once_reached(tmp_path: Path) -> None:
    clock = Clock(5000.0)
    text = flat(trials="budget: {gpu_hours: 1.0}")
    ctx, trials, _ = bed(tmp_path, text, gpus={"g1": 1}, clock=clock)
    await trials.step()
    job = ctx.ledger.jobs["t0"]
    job.status = JobStatus.RUNNING
    job.history = [Attempt(n=1, host="g1", gpus=[0, 1], session="s", attempt_dir="d", log="l",
                           start=3201.0)]  # 2 GPUs for 1799 s: under an hour
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"]
    ctx.ledger.jobs["t1"].status = JobStatus.RUNNING
    clock.now = 5001.0  # exactly 1.0 GPU-hour: the budget is spent
    ctx.ledger.jobs["t1"].status = JobStatus.KILLED
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"] and not trials.done()  # t0 still open
    end(ctx, "t0")
    job.history[0].end = 5001.0
    clock.now = 9000.0
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"] and trials.done()


async def test_nothing_is_asked_until_the_phases_it_depends_on_have_ended_well(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, staged())
    prep1, prep2 = ctx.ledger.jobs["prep1"], ctx.ledger.jobs["prep2"]
    prep1.status = JobStatus.COMPLETED
    await trials.step()  # prep2 still pending
    assert trial_ids(ctx) == []
    prep2.status = JobStatus.RUNNING
    await trials.step()
    assert trial_ids(ctx) == []
    prep2.status = JobStatus.COMPLETED
    await trials.step()
    assert trial_ids(ctx) == ["tune-t0"]
    end(ctx, "tune-t0")
    await trials.step()
    assert trials.studies["tune"].state(0) == "complete"
    assert trial_ids(ctx) == ["tune-t0", "tune-t1"]
    end(ctx, "tune-t1", JobStatus.KILLED, None)  # a trial's job needing a person blocks nothing
    ctx.paused = True
    await trials.step()
    assert trial_ids(ctx) == ["tune-t0", "tune-t1"] and not trials.done()
    ctx.paused = False
    await trials.step()
    assert trials.studies["tune"].counts() == {"complete": 1, "fail": 1, "running": 1}
    end(ctx, "tune-t2", JobStatus.STUCK, None)
    await trials.step()
    assert trials.done()


async def test_a_dependency_needing_a_person_blocks_the_search_unless_it_runs_anyway(
        tmp_path: Path) -> None:
    for failure, asks in (("block", False), ("run", True)):
        ctx, trials, _ = bed(tmp_path / failure, staged(failure, trials=2))
        ctx.ledger.jobs["prep1"].status = JobStatus.KILLED
        ctx.ledger.jobs["prep2"].status = JobStatus.COMPLETED
        await trials.step()
        assert trial_ids(ctx) == (["tune-t0"] if asks else []), failure
        assert trials.done() is not asks, failure  # blocked: nothing more will be asked
        if asks:
            end(ctx, "tune-t0")
            ctx.paused = True
            await trials.step()
            assert not trials.done()  # tune-t1 still to ask
            ctx.paused = False
            await trials.step()
            end(ctx, "tune-t1")
            await trials.step()
            assert trials.done()


async def test_each_phase_has_its_own_study_and_its_own_trials(tmp_path: Path) -> None:
    text = """
project: p
goal: {val_acc: max}
phases:
  - name: a
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 1}
    template: {cmd: "a --lr ${lr}"}
  - name: b
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 1}
    template: {cmd: "b --lr ${lr}"}
"""
    ctx, trials, _ = bed(tmp_path, text)
    weird = JobState(id="w", phase="b", cmd="c", origin="search", params={"trial": "x"})
    ctx.ledger.jobs["w"] = weird  # not a trial's: no trial number
    await trials.step()
    assert trial_ids(ctx) == ["w", "a-t0", "b-t0"]
    end(ctx, "b-t0")
    await trials.step()  # a's trial 0 is not b's
    assert trials.studies["a"].state(0) == "running"
    assert trials.studies["b"].state(0) == "complete"
    end(ctx, "a-t0", value=0.125)
    await trials.step()
    assert trials.studies["a"].state(0) == "complete" and trials.done()
    assert {s.study_name for s in _studies(tmp_path)} == {"a", "b"}


def _studies(run_dir: Path) -> list[Any]:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    storage = JournalStorage(JournalFileBackend(str(run_dir / "optuna.journal")))
    return list(storage.get_all_studies())


async def test_a_restarted_engine_adopts_open_trials_and_makes_their_missing_jobs(
        tmp_path: Path) -> None:
    text = flat(trials="trials: 3", grid="grid: {seed: [1, 2]}\n").replace(
        "${lr}", "${lr} ${seed}")
    ctx, trials, _ = bed(tmp_path, text, gpus={"g1": 4})
    await trials.step()
    assert trial_ids(ctx) == ["t0_seed1", "t0_seed2", "t1_seed1", "t1_seed2"]
    end(ctx, "t0_seed1")
    end(ctx, "t0_seed2")
    ctx.paused = True  # t0 told, t2 not asked
    await trials.step()
    kept = ctx.ledger.jobs["t1_seed1"]
    cmd = ctx.ledger.jobs["t1_seed2"].cmd
    # a kill -9: the state file had t1_seed1 (and t0's, told) but not t1_seed2
    ctx2, trials2, _ = bed(tmp_path, text, clock=Clock(2000.0))
    ctx2.ledger.jobs["t1_seed1"] = kept
    events: asyncio.Queue[Event] = ctx2.bus.subscribe()
    await trials2.start()
    assert trial_ids(ctx2) == ["t1_seed1", "t1_seed2"]  # t0 told: not made again
    assert ctx2.ledger.jobs["t1_seed1"] is kept and ctx2.ledger.jobs["t1_seed2"].cmd == cmd
    added = [e for e in _drain(events) if isinstance(e, JobAdded)]
    assert [e.job for e in added] == ["t1_seed2"]
    assert trials2.studies["main"].asked() == 2 and ctx2.bus.alerts == []


def _drain(queue: asyncio.Queue[Event]) -> list[Event]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


async def test_a_trial_job_is_added_like_a_run_time_job_with_its_definition(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 1"), clock=Clock(1234.5))
    events: asyncio.Queue[Event] = ctx.bus.subscribe()
    await trials.step()
    job = ctx.ledger.jobs["t0"]
    search = ctx.manifest.phases[0].search
    assert search is not None
    (spec,) = trial_jobs(search, 0, {"lr": job.params["lr"]})
    assert (job.id, job.phase, job.cmd, job.priority, job.origin, job.status) == (
        "t0", "main", f"train --lr {job.params['lr']}", 3, "search", JobStatus.PENDING)
    assert job.params == dict(spec.params) and job.spec == spec_to_json(spec)
    assert ctx.ledger.specs["t0"] == spec
    added = [e for e in _drain(events) if isinstance(e, JobAdded)]
    assert added == [JobAdded(project="p", at=1234.5, job="t0", phase="main", cmd=spec.cmd,
                              origin="search", source=None, by="search",
                              spec=spec_to_json(spec))]


async def test_a_trial_job_whose_id_is_taken_is_left_out_with_a_warning(tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 1"))
    mine = JobState(id="t0", phase="main", cmd="mine", origin="added")
    ctx.ledger.jobs["t0"] = mine
    await trials.step()
    assert ctx.ledger.jobs == {"t0": mine} and trials.studies["main"].asked() == 1
    assert [(a["level"], a["message"], a["job"]) for a in ctx.bus.alerts] == [
        ("warning", "search: job id t0 is taken; the trial runs without that job", "t0")]


async def test_a_lock_left_by_a_killed_engine_is_cleared_with_an_info_alert(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 1"))
    os.symlink(tmp_path / "optuna.journal", tmp_path / "optuna.journal.lock")
    await trials.start()
    assert [(a["level"], a["message"]) for a in ctx.bus.alerts] == [
        ("info", "search: removed optuna.journal's lock, left by an engine killed while "
                 "writing it")]


async def test_no_trial_is_asked_while_an_ended_trial_jobs_metrics_are_read(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 5"), gpus={"g1": 2})
    await trials.step()
    assert trial_ids(ctx) == ["t0", "t1"]
    ctx.ledger.jobs["t1"].status = JobStatus.RUNNING
    end(ctx, "t0", value=0.75)
    PENDING.add("t0")
    await trials.step()  # room for one, but t0's result is about to be known
    study = trials.studies["main"]
    assert trial_ids(ctx) == ["t0", "t1"] and study.state(0) == "running"
    PENDING.clear()
    await trials.step()  # told, then asked knowing it
    assert study.state(0) == "complete" and trial_ids(ctx) == ["t0", "t1", "t2"]


async def test_a_phase_held_by_the_crash_guard_or_a_person_asks_nothing(tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 3"), gpus={"g1": 1})
    await trials.step()
    assert trial_ids(ctx) == ["t0"]
    for hold in (ctx.crash_guard.held, ctx.search_edits.held):
        hold["main"] = "held"
        end(ctx, trial_ids(ctx)[-1])
        await trials.step()  # told; nothing asked, and done() knows more will be
        assert trials.studies["main"].counts() == {"complete": len(trial_ids(ctx))}
        assert not trials.done()
        count = len(trial_ids(ctx))
        del hold["main"]
        await trials.step()
        assert len(trial_ids(ctx)) == count + 1


async def test_a_trial_told_before_a_restart_holds_up_no_ask(tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, flat(trials="trials: 3"), gpus={"g1": 1})
    await trials.step()
    end(ctx, "t0")
    await trials.step()  # told; t1 asked
    t0, t1 = ctx.ledger.jobs["t0"], ctx.ledger.jobs["t1"]
    ctx2, trials2, asked = bed(tmp_path, flat(trials="trials: 3"), gpus={"g1": 1})
    ctx2.ledger.jobs.update({"t0": t0, "t1": t1})
    t1.status = JobStatus.RUNNING
    PENDING.add("t0")  # this engine has not read t0's metrics: Optuna has its value already
    await trials2.step()
    assert trial_ids(ctx2) == ["t0", "t1", "t2"] and "t0" not in asked
    assert trials2.studies["main"].counts() == {"complete": 1, "running": 2}


TWO_SEARCHES = """
project: p
goal: {val_acc: max}
hosts: [{name: g1}]
phases:
  - name: a
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 3, sampler: random, seed: 0}
    template: {cmd: "train --lr ${lr}"}
  - name: b
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 3, sampler: random, seed: 1}
    template: {cmd: "train --lr ${lr}"}
"""


async def test_trials_told_before_a_restart_hold_up_no_ask_in_any_of_two_searches(
        tmp_path: Path) -> None:
    ctx, trials, _ = bed(tmp_path, TWO_SEARCHES, gpus={"g1": 1})
    await trials.step()
    assert trial_ids(ctx) == ["a-t0", "b-t0"]  # one each: a GPU's room, its own waiting
    end(ctx, "a-t0")
    end(ctx, "b-t0")
    await trials.step()  # both told; a-t1 and b-t1 asked
    kept = {job_id: ctx.ledger.jobs[job_id] for job_id in trial_ids(ctx)}
    assert sorted(kept) == ["a-t0", "a-t1", "b-t0", "b-t1"]
    ctx2, trials2, _ = bed(tmp_path, TWO_SEARCHES, gpus={"g1": 1})
    ctx2.ledger.jobs.update(kept)
    for job_id in ("a-t1", "b-t1"):
        end(ctx2, job_id)
    PENDING.update({"a-t0", "b-t0"})  # this engine has not read them: Optuna has their values
    await trials2.step()
    assert {"a-t2", "b-t2"} <= set(trial_ids(ctx2)), trial_ids(ctx2)
