"""GPU health: quarantine on GPU faults, growing ECC errors, pending pages and vanished GPUs;
nothing launches on a quarantined GPU until a person releases it; a faulted job never goes back
to the GPU it faulted on. The rules on an in-memory host with a fixed clock, then on real
screen sessions with simulated GPUs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from eq_tui.api.events import GpuQuarantined
from eq_tui.api.model import JobStatus
from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.sim.state import hold_memory, init_sim_state, set_gpu_health
from tests.integration.test_ledger import drain, manifest
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.support.memory_host import MemoryHost

XID = "NVRM: Xid 79 GPU has fallen off the bus"


async def started(tmp: Path, ids: list[str], gpus: int) -> tuple[Engine, MemoryHost]:
    host = MemoryHost("m", gpus=gpus)
    engine = Engine(manifest(tmp, ids), tmp / "run", {"m": host},  # type: ignore[arg-type]
                    clock=lambda: host.now, watch=False)
    await engine.start(preflight=False)
    return engine, host


def launched_on(host: MemoryHost, job_id: str) -> list[tuple[int, ...]]:
    return [r.gpus for r in host.launches if r.job_id == job_id]


async def test_two_gpu_faults_within_an_hour_quarantine_the_gpu_until_released(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b", "c"], gpus=3)
    events = engine.subscribe()
    await engine.tick()
    assert [launched_on(host, j) for j in "abc"] == [[(0,)], [(1,)], [(2,)]]
    host.finish("a", 1, log=XID)
    await engine.tick()
    # a faulted on GPU 0: GPU 0 is free, but a never goes back there
    assert engine.jobs["a"].status == JobStatus.PENDING
    assert launched_on(host, "a") == [(0,)]
    assert engine.ctx.hosts["m"].quarantined == set()  # one fault is not yet a pattern
    host.now += 600
    host.finish("b", 1, log=XID)
    await engine.tick()
    # a goes to GPU 1 (not its own), b to GPU 0 (not its own)
    assert launched_on(host, "a") == [(0,), (1,)] and launched_on(host, "b") == [(1,), (0,)]
    host.now += 600
    host.finish("b", 1, log=XID)  # the second fault on GPU 0 within the hour
    await engine.tick()
    record = engine.ctx.hosts["m"]
    assert record.quarantined == {0}
    assert "2 jobs ended with a GPU fault" in record.quarantine_reasons[0]
    quarantined = [e for e in drain(events) if isinstance(e, GpuQuarantined)]
    assert [(e.host, e.gpu, e.released) for e in quarantined] == [("m", 0, False)]
    host.finish("c", 0)
    await engine.tick()
    assert launched_on(host, "b")[-1] == (2,)  # GPU 0 is free but quarantined
    for _ in range(3):
        await engine.tick()
    assert all(0 not in r.gpus for r in host.launches[5:])
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert state["quarantine"] == {"m": [0]} and "0" in state["quarantine_reasons"]["m"]
    view = engine.snapshot()["hosts"][0]["gpus"][0]
    assert view["quarantined"] and "GPU fault" in view["quarantine_reason"]

    result = await engine.command("release-gpu", ["m:0", "m:1", "nope"])
    assert result["results"] == {"m:0": "ok", "m:1": "GPU 1 of m is not quarantined",
                                 "nope": "not HOST:GPU"}
    assert record.quarantined == set() and record.quarantine_reasons == {}
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert state["quarantine"] == {}
    released = [e for e in drain(events) if isinstance(e, GpuQuarantined)]
    assert [(e.gpu, e.released) for e in released] == [(0, True)]
    engine.ctx.run_dir.release_lock()


async def test_gpu_faults_more_than_an_hour_apart_do_not_quarantine(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b"], gpus=2)
    await engine.tick()
    host.finish("a", 1, log=XID)  # GPU 0
    await engine.tick()
    host.now += 3700
    host.finish("b", 1, log=XID)  # GPU 1: a moves there... and b to GPU 0
    await engine.tick()
    assert launched_on(host, "b") == [(1,), (0,)]
    host.now += 10
    host.finish("b", 1, log=XID)  # GPU 0 again, but the first fault there is over an hour old
    await engine.tick()
    assert engine.ctx.hosts["m"].quarantined == set()
    engine.ctx.run_dir.release_lock()


# ---- on real sessions with simulated GPUs ------------------------------------------------------

FAST = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 1000"
LONG = "fake-train --epochs 500 --epoch-seconds 0.2 --mem 1000"


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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
