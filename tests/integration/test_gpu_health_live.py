"""GPU health on real screen sessions with simulated GPUs: pending pages, growing ECC errors and
a vanished GPU quarantine it; another user's process on a GPU is shown (the rules on an
in-memory host: tests/unit/test_gpu_health.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from eq_tui.hosts.factory import sim_state_dir
from eq_tui.sim.state import hold_memory, init_sim_state, set_gpu_health
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration

FAST = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 1000"
LONG = "fake-train --epochs 500 --epoch-seconds 0.2 --mem 1000"


async def test_pending_pages_quarantine_a_gpu_before_anything_launches_there(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    state = init_sim_state(sim_state_dir(run_dir, "sim"), host="sim", gpus=2, memory_mib=24576)
    set_gpu_health(state, pending_pages=[1])
    manifest = make_manifest(tmp_path, [job(f"j{i}", FAST) for i in range(4)],
                             hosts=sim_hosts(("sim", 2)))
    run = await start_engine(manifest, run_dir)
    assert run.task is not None
    assert await run.task == 0
    assert {tuple(a["gpus"]) for j in run.state["jobs"] for a in j["history"]} == {(0,)}
    assert run.state["quarantine"] == {"sim": [1]}
    assert "retired pages pending" in run.state["quarantine_reasons"]["sim"]["1"]


async def test_growing_ecc_errors_and_a_vanished_gpu_are_quarantined_across_a_restart(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("hold", LONG)], hosts=sim_hosts(("sim", 3)))
    first = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        first.engine.gpu_health.every_s = 0.0
        state = sim_state_dir(tmp_path / "run", "sim")
        set_gpu_health(state, ecc={1: 4})
        health = first.engine.gpu_health.hosts["sim"]
        await first.wait_for(lambda: health.ecc.get("GPU-sim-sim-1") == 4)
        assert first.engine.ctx.hosts["sim"].quarantined == set()  # errors, but not growing
    finally:
        await first.stop()
    # while no engine watches, the errors grow and a GPU falls off the bus
    set_gpu_health(state, ecc={1: 6}, vanished=[2])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        record = run.engine.ctx.hosts["sim"]
        await run.wait_for(lambda: record.quarantined == {1, 2})
        assert "uncorrected ECC errors grew from 4 to 6" in record.quarantine_reasons[1]
        assert "no longer listed" in record.quarantine_reasons[2]
        assert run.status("hold") == "running"  # a quarantine stops launches, not jobs
    finally:
        await run.stop()


async def test_an_other_process_gpu_shows_its_pid_user_and_command(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("hold", LONG)], hosts=sim_hosts(("sim", 2)))
    stranger = subprocess.Popen(["sleep", "600"], env={"PATH": os.environ["PATH"]},
                                start_new_session=True)
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("hold") == "running")
        gpu = 1 - run.engine.jobs["hold"].gpus[0]
        hold_memory(sim_state_dir(tmp_path / "run", "sim"), stranger.pid, gpu, 3000)

        def view() -> dict:  # type: ignore[type-arg]
            return run.engine.snapshot()["hosts"][0]["gpus"][gpu]  # type: ignore[return-value]

        await run.wait_for(lambda: bool(view().get("others")))
        other = view()["others"][0]
        assert other["pid"] == stranger.pid and other["command"] == "sleep 600"
        assert other["user"] and other["used_mib"] == 3000
    finally:
        await run.stop()
        stranger.kill()
        stranger.wait()
