"""GPU health: quarantine on GPU faults, growing ECC errors, pending pages and vanished GPUs;
nothing launches on a quarantined GPU until a person releases it; a faulted job never goes back
to the GPU it faulted on. The rules on an in-memory host with a fixed clock (on real screen
sessions with simulated GPUs: tests/integration/test_gpu_health_live.py)."""

from __future__ import annotations

import json
from pathlib import Path

from eq_tui.api.events import GpuQuarantined
from eq_tui.api.model import JobStatus
from eq_tui.engine.engine import Engine
from tests.integration.test_ledger import drain, manifest
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
