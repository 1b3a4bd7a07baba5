"""Engine promises with no chance in them: through the Engine's public constructor (an injected
clock where time matters) on real simulated hosts, judged from the hosts' own records.

- a `launching` attempt an engine left behind (killed while the launch was out) whose session
  is not there is given LAUNCH_GRACE_S before it is undone and launched again (a relaunch on a
  guess could run the job twice);
- launches the state file lost (recovered from the previous copy) are replayed from
  events.jsonl and adopted, not launched again;
- a job that fails with "disk full" stops its host until `resume`;
- a GPU that raised an Xid is quarantined: nothing of ours launches on it again.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from eq_tui.engine.engine import Engine
from eq_tui.engine.tick.judge import LAUNCH_GRACE_S
from eq_tui.errors import HostError
from eq_tui.hosts.base import Host, LaunchRequest
from eq_tui.hosts.factory import make_hosts, sim_state_dir
from eq_tui.manifest.model import PhaseSpec
from eq_tui.sim.state import read_runs
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.support.ground_truth import launches, launches_per_job, overlaps
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration
LONG = "fake-train --epochs 40 --epoch-seconds 0.1 --mem 1000"


class LaunchHangs:
    """The real simulated host, except that launch() starts nothing and does not return until
    let go (the engine is killed while its launch is out; letting go afterwards only ends this
    engine object, whose state file the test replaces with the one the kill left)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.let_go = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    async def launch(self, request: LaunchRequest) -> None:
        await self.let_go.wait()
        raise HostError("the engine was killed")


async def test_a_launch_cut_short_by_a_crash_waits_the_grace_period(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("a")], hosts=sim_hosts(("sim", 1)))
    run_dir = tmp_path / "run"
    sim = sim_state_dir(run_dir, "sim")
    hosts = make_hosts(manifest, run_dir)
    hanging = LaunchHangs(hosts["sim"])
    crashing = Engine(manifest, run_dir, {"sim": hanging},  # type: ignore[dict-item]
                      watch=False)
    await crashing.start()
    await crashing.tick(background_launches=True)
    assert str(crashing.jobs["a"].status) == "launching"
    on_disk = tmp_path / "killed_mid_launch.json"  # the state file as a SIGKILL leaves it
    shutil.copy(run_dir / "queue_state.json", on_disk)
    hanging.let_go.set()
    await crashing.stop()
    await crashing.run()
    shutil.copy(on_disk, run_dir / "queue_state.json")
    (run_dir / "queue_state.journal.jsonl").unlink(missing_ok=True)

    decided = float(json.loads(on_disk.read_text())["jobs"][0]["history"][0]["decided_at"])
    now = [decided + 1.0]
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir), clock=lambda: now[0],
                    watch=False)
    await engine.start()
    try:
        for seconds in (1.0, 20.0, LAUNCH_GRACE_S - 1.0):  # probed: no session, no pid
            now[0] = decided + seconds
            await engine.tick()
            assert str(engine.jobs["a"].status) == "launching", seconds
            assert launches_per_job([sim]) == {}, seconds  # not launched again on a guess
        now[0] = decided + LAUNCH_GRACE_S + 1.0
        await engine.tick()  # undone as never started; its GPU is free: launched anew
        first = engine.jobs["a"].history[0]
        assert first.launched is False and first.failure_class == "launch_failed"
        async def completed() -> bool:
            await engine.tick()
            return str(engine.jobs["a"].status) == "completed"

        await wait_until(completed, timeout=60, what="a, launched anew, to complete")
        assert launches_per_job([sim]) == {"a": 1}
    finally:
        await engine.stop()
        await engine.run()


async def test_launches_missing_from_a_recovered_state_file_are_adopted(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("a", LONG), job("b", LONG)])
    run_dir = tmp_path / "run"
    first = Engine(manifest, run_dir, make_hosts(manifest, run_dir))
    await first.start()
    # the previous good copy, written before anything was launched
    before = tmp_path / "before_launch.json"
    shutil.copy(run_dir / "queue_state.json", before)
    await first.tick()

    async def both_started() -> bool:
        return {r["job"] for r in read_runs(sim_state_dir(run_dir, "sim"))
                if r["event"] == "start"} == {"a", "b"}

    # the point is launches the recovered copy does not know: both must have happened
    await wait_until(both_started, timeout=60, what="a and b to start on the host (runs.jsonl)")
    await first.stop()
    await first.run()  # its jobs keep running in their sessions
    # the state file is lost; a person recovers the previous copy, which knows no launch
    shutil.copy(before, run_dir / "queue_state.json")
    (run_dir / "queue_state.journal.jsonl").unlink(missing_ok=True)
    second = await start_engine(manifest, run_dir)
    assert second.task is not None
    assert await asyncio.wait_for(second.task, 60) == 0
    restored = [a for a in second.engine.ctx.bus.alerts if "restored from the event journal" in
                a["message"]]
    assert len(restored) == 2
    assert {j["id"]: (j["status"], j["attempts"]) for j in second.state["jobs"]} == {
        "a": ("completed", 1), "b": ("completed", 1)}
    assert launches_per_job([sim_state_dir(run_dir, "sim")]) == {"a": 1, "b": 1}


async def test_a_full_disk_stops_its_host_until_resume(tmp_path: Path) -> None:
    phases = (PhaseSpec("main"),
              PhaseSpec("later", depends_on=("main",), on_dependency_failure="run"))
    manifest = make_manifest(tmp_path, [
        job("fills", "fake-train --epochs 1 --epoch-seconds 0.1 --mem 100 --disk-full"),
        job("after", "fake-train --epochs 1 --epoch-seconds 0.1 --mem 100", phase="later")],
        hosts=sim_hosts(("sim", 1)), phases=phases)
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    sim = sim_state_dir(tmp_path / "run", "sim")
    try:
        await run.wait_for(lambda: run.status("fills") == "stuck")
        assert run.engine.jobs["fills"].failure is not None
        assert str(run.engine.jobs["fills"].failure.cls) == "disk_full"
        assert "sim" in run.engine.ctx.stopped_hosts()
        # two full ticks later, with the GPU free and "after" due: nothing launched there
        ticks = run.engine.pacing.full_ticks
        await run.wait_for(lambda: run.engine.pacing.full_ticks >= ticks + 2)
        assert run.status("after") == "pending"
        assert launches_per_job([sim]) == {"fills": 1}
        assert (await run.engine.command("resume"))["ok"]
        await run.wait_for(lambda: run.status("after") == "completed")
        assert launches_per_job([sim]) == {"fills": 1, "after": 1}
    finally:
        await run.stop()


async def test_a_job_that_raised_an_xid_is_retried_on_another_gpu(tmp_path: Path) -> None:
    """One Xid is a fault of that attempt: its job runs again, never on the same GPU. (Two
    gpu_fault ends on one GPU within an hour quarantine it: tests/unit/test_gpu_health.py.)"""
    fake = "fake-train --epochs 2 --epoch-seconds 0.1 --mem 100"
    # an Xid on its first attempt only (a card that fell off the bus; the job is fine)
    jobs = [job("xid", f'if [ "$EQ_ATTEMPT" = 1 ]; then {fake} --xid; else {fake}; fi')]
    jobs += [job(f"n{i}", fake) for i in range(4)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 3)))
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    code = await asyncio.wait_for(run.task, 60)
    records = read_runs(sim_state_dir(tmp_path / "run", "sim"))
    starts = {r["attempt"]: int(r["gpu"]) for r in records
              if r["job"] == "xid" and r["event"] == "start"}
    assert sorted(starts) == [1, 2] and starts[2] != starts[1], starts
    assert not any(r.quarantined for r in run.engine.ctx.hosts.values())  # one fault only
    assert code == 0 and run.job("xid")["attempts"] == 2
    assert {(j, n) for (j, n) in launches([sim_state_dir(tmp_path / "run", "sim")])
            if j.startswith("n")} == {(f"n{i}", 1) for i in range(4)}


class WatcherFails:
    """The real simulated host whose watcher channel cannot be opened."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.watch_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    async def watch(self, request: Any, on_event: Any) -> Any:
        self.watch_calls += 1
        raise HostError("sim: this connection cannot stream a watcher")


async def test_without_a_watcher_the_probes_take_over(tmp_path: Path) -> None:
    """No watcher: exits are found by the periodic probe, and a GPU whose memory lingers is
    polled quickly (drain polling) until it reads free; still nothing starts on it before."""
    jobs = [job(f"j{i}", "fake-train --epochs 2 --epoch-seconds 0.1 --mem 3000 --linger 0.6")
            for i in range(5)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 2), memory_mib=8000))
    run_dir = tmp_path / "run"
    host = WatcherFails(make_hosts(manifest, run_dir)["sim"])
    engine = Engine(manifest, run_dir, {"sim": host}, poll=1.0,  # type: ignore[dict-item]
                    exit_when_done=True)
    await engine.start()
    assert await asyncio.wait_for(engine.run(), 120) == 0
    assert host.watch_calls >= 1 and engine.pacing.watch_wakeups == 0
    # light ticks: the drain polling of just that host
    assert engine.pacing.ticks > engine.pacing.full_ticks
    sim = sim_state_dir(run_dir, "sim")
    assert launches_per_job([sim]) == {f"j{i}": 1 for i in range(5)}
    assert overlaps(sim) == []
