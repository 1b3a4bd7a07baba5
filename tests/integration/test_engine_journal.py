"""The engine's state writes at scale: a tick writes the jobs it changed, not the whole state;
`launching` is on disk (in the journal) before the session starts; the state file is
rewritten whole when the queue finishes and at shutdown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.model import JobStatus
from eq_tui.cli.status_report import load_jobs
from eq_tui.engine.engine import Engine
from eq_tui.engine.state.store import RunDir
from eq_tui.hosts.base import LaunchRequest
from eq_tui.hosts.factory import make_hosts
from eq_tui.runfiles.statefile import SMALL_STATE_BYTES
from tests.support.engine_run import FAST_JOB, job, make_manifest


def raw_statuses(run_dir: Path) -> dict[str, str]:
    data = json.loads((run_dir / "queue_state.json").read_text())
    return {record["id"]: record["status"] for record in data["jobs"]}


def record_bytes(engine: Engine, job_ids: list[str]) -> int:
    return sum(len(json.dumps(engine.jobs[job_id].to_json())) for job_id in job_ids)


@pytest.mark.integration
async def test_a_tick_at_scale_writes_the_jobs_it_changed_not_the_state(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job(f"s{i}", FAST_JOB) for i in range(1500)])
    run_dir = tmp_path / "run"
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir))
    await engine.start(preflight=False)
    state_size = (run_dir / "queue_state.json").stat().st_size
    assert state_size > SMALL_STATE_BYTES
    host = engine.hosts["sim"]
    real_launch = host.launch
    seen_at_launch: list[tuple[str, str]] = []

    async def launch(request: LaunchRequest) -> None:
        on_disk = RunDir(run_dir).load_state()
        assert on_disk is not None
        status = next(j["status"] for j in on_disk["jobs"] if j["id"] == request.job_id)
        seen_at_launch.append((status, raw_statuses(run_dir)[request.job_id]))
        await real_launch(request)

    host.launch = launch  # type: ignore[method-assign]
    try:
        before = engine.run_dir.state.bytes_written
        await engine.tick()
        launched = [j.id for j in engine.jobs.values() if j.status != JobStatus.PENDING]
        assert len(launched) == 2  # two GPUs
        # `launching` was durable (in the journal) before each session started
        assert seen_at_launch == [("launching", "pending")] * 2
        written = engine.run_dir.state.bytes_written - before
        # two writes of the two changed records (launching, then running) and line overhead
        assert written <= 2 * record_bytes(engine, launched) + 2 * 400
        assert written < state_size / 100
        on_disk = RunDir(run_dir).load_state()
        assert on_disk is not None and on_disk["jobs"] == engine.persistence.state_json()["jobs"]

        quiet = engine.run_dir.state.bytes_written
        await engine.command("pause")
        await engine.tick()  # paused: the pause, and at most the two jobs' progress
        assert engine.run_dir.state.bytes_written - quiet <= record_bytes(engine, launched) + 800
    finally:
        await engine.stop()
        await engine.run()
    # shutdown compacted the journal into the state file
    assert (run_dir / "queue_state.journal.jsonl").stat().st_size == 0
    assert raw_statuses(run_dir) == {j.id: str(j.status) for j in engine.jobs.values()}


@pytest.mark.integration
async def test_the_state_file_is_rewritten_whole_when_the_queue_finishes(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job(f"s{i}", FAST_JOB) for i in range(3)])
    run_dir = tmp_path / "run"
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir), poll=0.2)
    engine.run_dir.state.small_bytes = 0  # journal every change, as a large state would
    engine.run_dir.state.compact_fraction = 1000.0
    await engine.start(preflight=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.finished)
        # the engine runs on; the finish itself wrote the state whole and emptied the journal
        await until(lambda: (run_dir / "queue_state.journal.jsonl").stat().st_size == 0)
        assert not task.done()
        assert engine.run_dir.state.appends > 0
        assert raw_statuses(run_dir) == dict.fromkeys(("s0", "s1", "s2"), "completed")
    finally:
        await engine.stop()
        await task


async def until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_status_reads_the_journal_too(tmp_path: Path) -> None:
    store = RunDir(tmp_path)
    store.state.small_bytes, store.state.compact_fraction = 0, 1000.0
    records: list[dict[str, Any]] = [
        {"id": f"j{i}", "phase": "main", "cmd": "run", "status": "pending"} for i in range(3)]
    store.save_state({"version": 1, "project": "p", "jobs": records})
    store.save_changes({"version": 1, "project": "p"},
                       [{**records[1], "status": "stuck",
                         "failure": {"class": "exit_nonzero", "detail": "exit 1"}}])
    assert raw_statuses(tmp_path)["j1"] == "pending"  # only in the journal so far
    _saved, jobs = load_jobs(tmp_path)
    assert [str(j.status) for j in jobs] == ["pending", "stuck", "pending"]
