"""The engine and the hosts' GPU claims: other engines' claims counted as held (pure), and a
launch the claims refuse placed again with no attempt spent (a real engine on simulated GPUs,
another engine's claim landing between its probe and its launch)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from eq_tui.api.holders import describe, gpu_holder_lines, holders_of
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.decide.placement import GpuView
from eq_tui.engine.engine import Engine
from eq_tui.engine.tick.claims import with_claims
from eq_tui.engine.tick.wants import waiting_need
from eq_tui.hosts.base import GpuProcess, GpuReading, HostSnapshot
from eq_tui.hosts.claim_types import GpuClaim
from eq_tui.hosts.claims import WaitingNeed, parse_claims, pending_by_gpu, want_arg
from eq_tui.hosts.local import LocalRunner, sim_environment
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.sim.state import init_sim_state
from eq_tui.tui.host_panel import gpu_line
from tests.support.engine_run import EngineRun, job, make_manifest, sim_hosts
from tests.support.ground_truth import launches

READINGS = (GpuReading(0, "u0", "g", 100, 24000, 0), GpuReading(1, "u1", "g", 9000, 24000, 90))


def claim(gpu: int, token: str, mib: int | None, pid: int = 700) -> GpuClaim:
    return GpuClaim(f"c.{gpu}.{token}", gpu, "bob", "q" if token != "mine" else "p", token,
                    "j", 1, pid, mib, "eq_q_x_j_a1")


def test_the_probes_claim_lines_are_read_and_garbage_is_skipped() -> None:
    lines = ["c.0.bob.q.ab12cd.j.a2 0 bob q ab12cd j 2 4242 - eq_q_ab12cd_j_a2",
             "c.1.bob.q.ab12cd.k.a1 1 bob q ab12cd k 1 4243 6000 eq_q_ab12cd_k_a1",
             "c.1.bob.q.x 1 bob q x k one 4243 6000 s", "half a line", ""]
    assert parse_claims(lines) == (
        GpuClaim("c.0.bob.q.ab12cd.j.a2", 0, "bob", "q", "ab12cd", "j", 2, 4242, None,
                 "eq_q_ab12cd_j_a2"),
        GpuClaim("c.1.bob.q.ab12cd.k.a1", 1, "bob", "q", "ab12cd", "k", 1, 4243, 6000,
                 "eq_q_ab12cd_k_a1"))


def test_a_claim_holds_what_its_job_has_not_allocated_yet() -> None:
    # its job's processes are in the group its wrapper leads: 4000 of its 6000 are in use
    processes = (GpuProcess(801, "u1", 4000, pgid=700, sid=700),
                 GpuProcess(900, "u1", 5000, pgid=900, sid=900))
    assert pending_by_gpu([claim(1, "t", 6000)], READINGS, processes) == {1: 2000}
    assert pending_by_gpu([claim(1, "t", 3000)], READINGS, processes) == {1: 0}
    assert pending_by_gpu([claim(0, "t", 6000), claim(0, "u", None, 701)], READINGS,
                          ()) == {0: None}


def test_other_engines_claims_count_as_held_and_our_own_do_not() -> None:
    views = (GpuView(0, 100, 24000, 100), GpuView(1, 9000, 24000, 9000))
    snap = HostSnapshot("h", True, 0.0, gpus=READINGS,
                        claims=(claim(0, "t", None), claim(1, "u", 6000), claim(1, "mine", 8000)))
    held = with_claims(views, snap, "p", "mine")
    # claimed whole: reads full; a shared claim: its estimate on top of the reading
    assert held == (GpuView(0, 24000, 24000, 24000), GpuView(1, 15000, 24000, 15000))
    assert with_claims(views, HostSnapshot("h", True, 0.0, gpus=READINGS), "p", "mine") == views


FLOCK = """#!/bin/sh
# another engine takes GPU 0 just before this launch gets the lock (once)
if [ ! -e "$EQ_TEST_MARK" ]; then
    sleep 300 </dev/null >/dev/null 2>&1 &
    echo $! > "$EQ_TEST_MARK"
    printf 'eqclaim1 0 bob q beef01 theirs 1 %s - - eq_q_beef01_theirs_a1\\n' "$!" \\
        > "$EQ_TUI_CLAIMS/c.0.bob.q.beef01.theirs.a1"
fi
exec /usr/bin/flock "$@"
"""


@pytest.mark.integration
@pytest.mark.skipif(not os.path.exists("/usr/bin/flock"), reason="needs flock")
async def test_a_refused_launch_spends_no_attempt_and_is_placed_again(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("mine", "fake-train --epochs 1 --epoch-seconds 0.1 "
                                                    "--mem 1000")],
                             hosts=sim_hosts(("sim", 1)))
    state = init_sim_state(tmp_path / "sim", host="sim", gpus=1, memory_mib=24576)
    fakes = tmp_path / "bin"
    fakes.mkdir()
    (fakes / "flock").write_text(FLOCK)
    (fakes / "flock").chmod(0o755)
    mark = tmp_path / "theirs.pid"
    env = sim_environment(str(state))
    env.update(PATH=f"{fakes}:{env['PATH']}", EQ_TEST_MARK=str(mark))
    host = ShellHost("sim", LocalRunner(env), log_dir=str(tmp_path / "logs"))
    engine = Engine(manifest, tmp_path / "run", {"sim": host}, poll=0.2, exit_when_done=True)
    run = EngineRun(engine=engine, manifest=manifest, run_dir=tmp_path / "run")
    await engine.start()
    run.task = asyncio.create_task(engine.run())
    try:
        await run.wait_for(mark.exists)
        await run.wait_for(lambda: "refused" in (engine.jobs["mine"].reason or "")
                           or engine.jobs["mine"].history == [])
        await run.ticks_pass(3)
        mine = engine.jobs["mine"]
        # refused, then waiting on the GPU the claim holds: no attempt, no failure
        assert mine.status == "pending" and mine.history == [] and mine.attempts == 0
        assert mine.failure is None and launches([state]) == {}
        os.kill(int(mark.read_text()), signal.SIGKILL)  # their job ends: its claim is void
        await run.wait_for(lambda: str(engine.jobs["mine"].status) == "completed")
    finally:
        if mark.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(mark.read_text()), signal.SIGKILL)
        await run.stop()
    mine = engine.jobs["mine"]
    assert [a.n for a in mine.history] == [1] and mine.attempts == 1
    assert launches([state]) == {("mine", 1): 1}
    events = (tmp_path / "run" / "events.jsonl").read_text()
    assert "launch refused: sim: GPU 0 is claimed by bob's q/theirs" in events


def test_each_gpu_names_its_holders_ours_other_engines_and_other_processes() -> None:
    processes = (GpuProcess(301, "u1", 2000, "me", "python train.py", pgid=300, sid=300),
                 GpuProcess(801, "u1", 4000, "bob", "python t.py", pgid=700, sid=700),
                 GpuProcess(950, "u1", 3000, "alice", "/usr/bin/python3 eval.py --big",
                            pgid=950, sid=900))
    snap = HostSnapshot("h", True, 0.0, gpus=READINGS, processes=processes,
                        claims=(claim(1, "t", 6000), claim(1, "mine", 8000, pid=300),
                                claim(0, "t", None, pid=701)))
    gpu1 = {"index": 1, "uuid": "u1", "jobs": [{"id": "j3", "mib": 8000, "used": 2000}]}
    holders = holders_of(gpu1, snap, {300}, "p", "mine")
    assert holders == [
        {"kind": "ours", "job": "j3", "mib": 8000, "used_mib": 2000},
        {"kind": "eq-tui", "user": "bob", "project": "q", "job": "j", "attempt": 1,
         "mib": 6000, "used_mib": 4000},
        {"kind": "process", "pid": 950, "user": "alice",
         "command": "/usr/bin/python3 eval.py --big", "used_mib": 3000}]
    assert [describe(h) for h in holders] == [
        "ours: j3", "bob's q/j (3.9G)", "pid 950 alice python3 eval.py (2.9G)"]
    gpu0 = {"index": 0, "uuid": "u0"}
    [whole] = holders_of(gpu0, snap, {300}, "p", "mine")
    assert describe(whole) == "bob's q/j"
    # the grid's line for a GPU another engine's job holds, before it allocated anything
    line = gpu_line({**gpu0, "memory_used_mib": 100, "memory_total_mib": 24000,
                     "utilization_pct": 0, "allowed": True, "holders": [whole]}, 500).plain
    assert line.endswith("bob's q/j")
    assert gpu_holder_lines([{"name": "h", "gpus": [
        {**gpu1, "memory_used_mib": 9000, "memory_total_mib": 24000, "holders": holders}]}]) \
        == ["h GPU 1  8.8G/23.4G  ours: j3; bob's q/j (3.9G); "
            "pid 950 alice python3 eval.py (2.9G)"]


def test_the_want_file_says_what_the_waiting_jobs_could_use(tmp_path: Path) -> None:
    """Fair turns hold a GPU only for an engine that could take it: its want says the fewest
    GPUs a waiting job needs, the least memory a sharing one needs (with the margin) and the
    free threshold when one wants its GPUs alone. CPU-only jobs wait for no GPU."""
    specs = [job("big", mem_mib=9000), job("small", mem_mib=3000, gpus_per_job=2),
             job("alone", gpus_per_job=2), job("cpu", gpus_per_job=0),
             job("auto", mem_mib="auto")]
    manifest = make_manifest(tmp_path, specs)
    states = {spec.id: JobState(id=spec.id, phase="main", cmd=spec.cmd) for spec in specs}

    def need(*ids: str) -> tuple[bool, WaitingNeed | None]:
        return waiting_need(manifest, ((states[i], by_id[i]) for i in ids), now=0.0)

    by_id = {spec.id: spec for spec in specs}
    margin = manifest.gpu_margin_mib
    assert need("big", "small") == (True, WaitingNeed(1, 3000 + margin, None))
    assert need("big", "alone") == (True, WaitingNeed(1, 9000 + margin,
                                                      manifest.gpu_free_threshold_mib))
    assert need("alone") == (True, WaitingNeed(2, None, manifest.gpu_free_threshold_mib))
    assert need("cpu") == (False, None)
    assert need("big", "auto") == (True, None)  # not known yet: any GPU it may use
    states["big"].status = JobStatus.RUNNING
    assert need("big") == (False, None)
    assert want_arg("p", "t", waiting=True, poll_s=0.5, gpus=(1, 0),
                    need=WaitingNeed(1, 4024, None)) == "p:t:1:1:0,1:1:4024:-"
