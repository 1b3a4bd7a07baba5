"""The crash guard on real sessions: a broken command costs at most `after` launches, then the
phase is held until a person retries or resumes; healthy sweeps never trip it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from eq_tui.engine.events import PhaseHeld
from eq_tui.manifest.model import CrashGuard
from tests.support.engine_run import (
    FAST_JOB,
    EngineRun,
    job,
    make_manifest,
    run_to_end,
    sim_hosts,
    start_engine,
)

pytestmark = pytest.mark.integration
# a command that does not exist, behind a variable preflight cannot expand (a plain missing
# word is refused by preflight before anything launches: tests/test_preflight_command.py)
MISSING = "$HOME/no-such-trainer-xyz --lr 0.1"


async def launched_attempts(run: EngineRun, host: str = "sim") -> list[Path]:
    """Attempt dirs on the host itself: what really launched, whatever the engine thinks."""
    root = await run.engine.hosts[host].log_root(run.engine.project, run.engine.token)
    return sorted(p for p in Path(root).glob("*/a*") if (p / "cmd").exists())


def held(run: EngineRun) -> list[PhaseHeld]:
    return [e for e in run.events if isinstance(e, PhaseHeld)]


async def broken_sweep(tmp_path: Path, cmd: str, jobs: int = 8) -> EngineRun:
    manifest = make_manifest(tmp_path, [job(f"j{i}", f"{cmd} --seed {i}") for i in range(jobs)],
                             hosts=sim_hosts(("sim", 6)))
    run = await start_engine(manifest, tmp_path / "run")
    await run.wait_for(lambda: bool(held(run)))
    # give a launch that should not happen the chance to happen
    await run.wait_for(lambda: all(not j.status.is_active for j in run.engine.jobs.values()))
    await asyncio.sleep(0.5)  # several ticks: nothing more may launch while held
    return run


async def test_a_command_that_does_not_exist_is_held_after_three_launches(
        tmp_path: Path) -> None:
    run = await broken_sweep(tmp_path, MISSING)
    try:
        assert len(await launched_attempts(run)) == 3
        event = held(run)[0]
        assert event.phase == "main" and len(event.jobs) == 3
        assert "not found" in event.line
        assert run.engine.ctx.crash_guard.held["main"].startswith("crash guard: 3 jobs")
        waiting = [j for j in run.engine.jobs.values() if j.status == "pending"]
        assert len(waiting) == 5
        assert all((j.reason or "").startswith("crash guard") for j in waiting)
        alerts = [a["message"] for a in run.engine.ctx.bus.alerts if a["level"] == "error"]
        assert any("retry one of them (r in the UI) or resume the queue" in m for m in alerts)
        assert not run.engine.finished  # it waits for a person
        assert run.state["crash_guard"]["held"]["main"]
        assert run.engine.snapshot()["held_phases"] == {"main": event.reason}
        # `eq-tui status` (live, over the control socket) says it too, and exits 1
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "eq_tui", "status", str(run.run_dir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 1, err
        assert b"phase main is held, nothing of it launches: crash guard: 3 jobs" in out
    finally:
        await run.stop()


async def test_a_script_that_raises_at_once_is_held_and_retry_releases_it(
        tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nraise ValueError('bad config: ' + sys.argv[-1])\n")
    run = await broken_sweep(tmp_path, "python3 train.py")
    try:
        assert len(await launched_attempts(run)) == 3
        assert held(run)[0].failure_class == "exit_nonzero"
        assert "ValueError: bad config" in held(run)[0].line
        # the person fixes the script and retries one job: the phase launches again
        script.write_text("print('fine')\n")
        stuck = next(j.id for j in run.engine.jobs.values() if j.status == "stuck")
        result = await run.engine.command("retry", [stuck])
        assert result["ok"]
        assert "main" not in run.engine.ctx.crash_guard.held
        await run.wait_for(lambda: sum(j.status == "completed"
                                       for j in run.engine.jobs.values()) == 6)
        assert any(e.type == "phase_released" for e in run.events)
    finally:
        await run.stop()


async def test_a_held_phase_stays_held_after_a_restart_until_resume(tmp_path: Path) -> None:
    run = await broken_sweep(tmp_path, MISSING, jobs=5)
    await run.stop()
    again = await start_engine(run.manifest, tmp_path / "run")
    try:
        assert "main" in again.engine.ctx.crash_guard.held
        await asyncio.sleep(0.5)  # ticks run; nothing launches
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
