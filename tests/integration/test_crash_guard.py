"""The crash guard on real sessions: a broken command costs at most the wave launched before
its first crash was seen, then the phase is held until a person retries or resumes; a healthy
sweep launches exactly as without the guard, and jobs that trained before failing (a NaN loss)
or the seeds of one configuration never hold a phase. What launched is read from the hosts."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from eq_tui.api.events import PhaseHeld
from eq_tui.manifest.model import CrashGuard, JobSpec
from eq_tui.sim.state import run_intervals
from tests.support.engine_run import (
    FAST_JOB,
    EngineRun,
    job,
    make_manifest,
    run_to_end,
    sim_hosts,
    start_engine,
)
from tests.support.ground_truth import most_overlapping

pytestmark = pytest.mark.integration
# a command that does not exist, behind a variable preflight cannot expand (a plain missing
# word is refused by preflight before anything launches:
# tests/integration/test_preflight_command.py)
MISSING = "$HOME/no-such-trainer-xyz --lr 0.1"


async def launched_attempts(run: EngineRun, host: str = "sim") -> list[Path]:
    """Attempt dirs on the host itself: what really launched, whatever the engine thinks."""
    root = await run.engine.hosts[host].log_root(run.engine.project, run.engine.token)
    return sorted(p for p in Path(root).glob("*/a*") if (p / "cmd").exists())


def held(run: EngineRun) -> list[PhaseHeld]:
    return [e for e in run.events if isinstance(e, PhaseHeld)]


async def broken_sweep(tmp_path: Path, cmd: str, jobs: int = 8,
                       hosts: tuple[tuple[str, int], ...] = (("sim", 6),)) -> EngineRun:
    manifest = make_manifest(tmp_path, [job(f"j{i}", f"{cmd} --seed {i}") for i in range(jobs)],
                             hosts=sim_hosts(*hosts))
    run = await start_engine(manifest, tmp_path / "run")
    await run.wait_for(lambda: bool(held(run)))
    await run.wait_for(lambda: all(not j.status.is_active for j in run.engine.jobs.values()))
    await run.ticks_pass(3)  # ticks that would launch more, had the hold not stopped them
    return run


async def test_a_command_that_does_not_exist_is_held_after_one_wave(tmp_path: Path) -> None:
    run = await broken_sweep(tmp_path, MISSING)
    try:
        assert len(await launched_attempts(run)) == 6  # the first wave: one job per GPU
        event = held(run)[0]
        assert event.phase == "main" and len(event.jobs) >= 3
        assert "not found" in event.line
        assert run.engine.ctx.crash_guard.held["main"].startswith(
            f"crash guard: {len(event.jobs)} jobs")
        waiting = [j for j in run.engine.jobs.values() if j.status == "pending"]
        assert len(waiting) == 2
        assert all((j.reason or "").startswith("crash guard") for j in waiting)
        alerts = [a["message"] for a in run.engine.ctx.bus.alerts if a["level"] == "error"]
        retry = (f"`eq-tui retry {tmp_path / 'run'} --stuck --phase main` (retries every stuck "
                 "job of the phase and releases it)")
        assert any(retry in m and f"`eq-tui release {tmp_path / 'run'} --phase main`" in m
                   for m in alerts)
        assert not run.engine.finished  # it waits for a person
        assert run.state["crash_guard"]["held"]["main"]
        assert run.engine.snapshot()["held_phases"] == {"main": event.reason}
        # `eq-tui status` (live, over the control socket) says it too, and exits 1
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "eq_tui", "status", str(run.run_dir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 1, err
        assert b"phase main is held, nothing of it launches: crash guard: " in out
    finally:
        await run.stop()


async def test_a_script_that_raises_at_once_is_held_and_retry_releases_it(
        tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nraise ValueError('bad config: ' + sys.argv[-1])\n")
    run = await broken_sweep(tmp_path, "python3 train.py")
    try:
        assert len(await launched_attempts(run)) == 6
        assert held(run)[0].failure_class == "exit_nonzero"
        assert "ValueError: bad config" in held(run)[0].line
        # the person fixes the script and retries one job: the phase launches again
        script.write_text("print('fine')\n")
        stuck = next(j.id for j in run.engine.jobs.values() if j.status == "stuck")
        result = await run.engine.command("retry", [stuck])
        assert result["ok"]
        assert "main" not in run.engine.ctx.crash_guard.held
        await run.wait_for(lambda: sum(j.status == "completed"
                                       for j in run.engine.jobs.values()) == 3)
        assert any(e.type == "phase_released" for e in run.events)
    finally:
        await run.stop()


async def test_a_held_phase_stays_held_after_a_restart_until_resume(tmp_path: Path) -> None:
    # two GPUs: two crash, then one more launch brings the third alike crash
    run = await broken_sweep(tmp_path, MISSING, jobs=5, hosts=(("sim", 2),))
    assert len(await launched_attempts(run)) == 3
    await run.stop()
    again = await start_engine(run.manifest, tmp_path / "run")
    try:
        assert "main" in again.engine.ctx.crash_guard.held
        await again.ticks_pass(3)  # ticks run; nothing launches
        assert len(await launched_attempts(again)) == 3
        await again.engine.command("resume")
        assert "main" not in again.engine.ctx.crash_guard.held
        # the two jobs left launch (and fail: two are not enough to hold it again)
        await again.wait_for(lambda: again.engine.finished)
        assert len(await launched_attempts(again)) == 5
    finally:
        await again.stop()


async def test_a_healthy_sweep_with_one_failure_does_not_trip_it(tmp_path: Path) -> None:
    jobs = [job(f"ok{i}") for i in range(7)] + [job("bad", f"{FAST_JOB} --exit-code 3")]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 4)))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    assert not held(run)
    statuses = [j["status"] for j in run.state["jobs"]]
    assert statuses.count("completed") == 7 and statuses.count("stuck") == 1


async def test_crash_guard_false_lets_a_broken_sweep_run_out(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job(f"j{i}", MISSING) for i in range(5)],
                             crash_guard=CrashGuard(enabled=False))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    assert not held(run)
    assert len(await launched_attempts(run)) == 5


async def test_a_broken_command_on_sixteen_gpus_costs_one_wave(tmp_path: Path) -> None:
    # two hosts of 8 GPUs (a host runs at most 8 whole-GPU jobs unless max_parallel says more)
    run = await broken_sweep(tmp_path, MISSING, jobs=64, hosts=(("a", 8), ("b", 8)))
    try:
        # (both simulated hosts are this machine: their log roots are one folder)
        launched = {path for host in "ab" for path in await launched_attempts(run, host)}
        assert len(launched) == 16
        assert sum(j.status == "pending" for j in run.engine.jobs.values()) == 48
    finally:
        await run.stop()


def most_at_once(run: EngineRun) -> int:
    """The most jobs running at one moment on the host, from its own start/end records."""
    spans = {(i.job, i.attempt): (i.start, i.end) for i in run_intervals(run.runs())}
    return most_overlapping(spans.values())


async def test_a_healthy_packed_sweep_launches_as_without_the_guard(tmp_path: Path) -> None:
    """Eight 18 GiB jobs on two 80 GiB GPUs: all eight at once (4 x 18 GiB + the margin fit
    one card), with the guard on, as with it off."""
    for guard in (CrashGuard(), CrashGuard(enabled=False)):
        jobs = [job(f"j{i}", "fake-train --epochs 4 --epoch-seconds 1.0 --mem 18000",
                    mem_mib=18432) for i in range(8)]
        hosts = sim_hosts(("sim", 2), memory_mib=81920)
        where = tmp_path / str(guard.enabled)
        where.mkdir()
        code, run = await run_to_end(make_manifest(where, jobs, hosts=hosts, crash_guard=guard),
                                     where / "run")
        assert code == 0
        assert most_at_once(run) == 8, guard


def grid(bad_cmd: str, bad_lr: str = "1.0") -> list[JobSpec]:
    return [job(f"lr{lr}_s{seed}", bad_cmd if lr == bad_lr else FAST_JOB,
                params=(("lr", lr), ("seed", seed)))
            for lr in (bad_lr, "0.01", "0.03") for seed in ("1", "2", "3")]


async def test_a_grid_whose_highest_learning_rate_ends_in_nan_runs_to_the_end(
        tmp_path: Path) -> None:
    # the three seeds of lr 1.0 train two epochs, then "ValueError: loss is nan", side by side
    jobs = grid(f"{FAST_JOB} --exit-code 3")
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 3))),
                                 tmp_path / "run")
    assert code == 1 and not held(run)
    ends = {(i.job, i.exit) for i in run_intervals(run.runs())}
    assert {job for job, code in ends if code == 3} == {"lr1.0_s1", "lr1.0_s2", "lr1.0_s3"}
    assert {job for job, code in ends if code == 0} == {j.id for j in jobs[3:]}


async def test_the_seeds_of_one_configuration_failing_at_once_do_not_hold_the_phase(
        tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("raise ValueError('lr too large for this model')\n")
    jobs = grid(f"python3 {script}")
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 3))),
                                 tmp_path / "run")
    assert code == 1 and not held(run)
    statuses = {j["id"]: j["status"] for j in run.state["jobs"]}
    assert [statuses[j.id] for j in jobs[:3]] == ["stuck"] * 3
    assert {i.job for i in run_intervals(run.runs()) if i.exit == 0} == {j.id for j in jobs[3:]}
