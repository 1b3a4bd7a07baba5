"""The ledger: every change to a job goes through it, is published and is marked for writing.
Fast: an in-memory host and a fixed clock, no sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eq_tui.api.events import JobStateChanged, JobUpdated
from eq_tui.api.model import FailureClass, JobStatus
from eq_tui.engine.engine import Engine
from eq_tui.errors import RunDirError
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest
from tests.support.memory_host import MemoryHost


def manifest(tmp: Path, ids: list[str], cmd: str = "train") -> Manifest:
    source = tmp / "m.yaml"
    source.touch()
    return Manifest(project="p", source=str(source), hosts=(HostSpec(name="m"),),
                    jobs=tuple(JobSpec(id=i, phase="main", cmd=f"{cmd} {i}") for i in ids))


async def started(tmp: Path, ids: list[str], **kwargs: object) -> tuple[Engine, MemoryHost]:
    host = MemoryHost("m", gpus=2)
    engine = Engine(manifest(tmp, ids, **kwargs), tmp / "run", {"m": host},  # type: ignore[arg-type]
                    clock=lambda: host.now, watch=False)
    await engine.start(preflight=False)
    return engine, host


def drain(queue: asyncio.Queue) -> list:  # type: ignore[type-arg]
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


async def test_a_status_change_is_published_written_and_frees_the_gpus(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    job = engine.jobs["a"]
    assert job.status == JobStatus.RUNNING and (job.host, job.gpus) == ("m", [0])
    queue = engine.subscribe()
    ledger = engine.ctx.ledger
    ledger.changed_ids.clear()
    host.now += 5
    ledger.set_status(job, JobStatus.STUCK, failure_class="exit_nonzero", detail="boom")
    events = drain(queue)
    assert [type(e) for e in events] == [JobStateChanged, JobUpdated]
    assert (events[0].old, events[0].new, events[0].attempt) == ("running", "stuck", 1)
    assert events[1].state["status"] == "stuck" and events[1].state["host"] == "m"
    assert list(ledger.changed_ids) == ["a"] and ledger.unsaved
    assert engine.pacing.released_at == {("m", 0): host.now}
    assert job.failure is not None and (job.failure.cls, job.failure.detail) == (
        "exit_nonzero", "boom")
    engine.ctx.run_dir.release_lock()


async def test_where_a_job_runs_is_read_from_its_current_attempt(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    job = engine.jobs["a"]
    assert (job.host, job.gpus, job.log, job.started, job.ended) == (None, [], None, None, None)
    attempt = engine.ctx.ledger.begin_attempt(job, n=1, host="m", gpus=[1], session="s1",
                                              attempt_dir="/d/a/a1", decided_at=host.now)
    assert job.status == JobStatus.LAUNCHING and job.attempts == 1
    assert (job.host, job.gpus, job.log) == ("m", [1], "/d/a/a1/log")
    attempt.start, attempt.end = 10.0, 12.5
    assert (job.started, job.ended) == (10.0, 12.5)
    attempt.launched = False  # its session never started: it runs nowhere
    assert (job.host, job.gpus) == (None, [])
    record = job.to_json()
    assert (record["host"], record["log"], record["started"]) == (None, "/d/a/a1/log", 10.0)
    engine.ctx.run_dir.release_lock()


async def test_a_replayed_attempt_writes_no_second_launching_line(tmp_path: Path) -> None:
    engine, _ = await started(tmp_path, ["a"])
    before = engine.ctx.run_dir.read_events(since=0)
    engine.ctx.ledger.begin_attempt(engine.jobs["a"], n=1, host="m", gpus=[0], session="s",
                                    attempt_dir="/d", decided_at=1.0, replayed=True)
    assert engine.jobs["a"].status == JobStatus.LAUNCHING
    assert engine.ctx.run_dir.read_events(since=0) == before
    engine.ctx.run_dir.release_lock()


async def test_reconcile_adds_updates_retires_and_keeps_what_runs(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b", "c"])
    await engine.tick()  # a, b run; c waits
    host.finish("a", 0)
    await engine.tick()
    assert engine.jobs["a"].status == JobStatus.COMPLETED
    engine.ctx.run_dir.release_lock()
    # the manifest drops a (completed) and b (running), changes c, adds d
    edited = manifest(tmp_path, ["c", "d"], cmd="train2")
    again = Engine(edited, tmp_path / "run", {"m": host},  # type: ignore[dict-item]
                   clock=lambda: host.now, watch=False)
    await again.start(preflight=False)
    assert list(again.jobs) == ["c", "d", "b"]
    assert again.jobs["c"].cmd == "train2 c" and again.jobs["b"].status == JobStatus.RUNNING
    assert [r["id"] for r in again.ctx.ledger.retired] == ["a"]
    messages = [a["message"] for a in again.ctx.bus.alerts]
    assert any("c: command changed" in m for m in messages)
    assert any("b is no longer in the manifest" in m for m in messages)
    again.ctx.run_dir.release_lock()


async def test_a_lost_session_is_requeued_once_and_counted_once(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    for expected in (JobStatus.PENDING, JobStatus.STUCK):
        host.vanish("a")
        await engine.tick()  # judged lost; the first time it is launched again at once
        job = engine.jobs["a"]
        assert job.retries_by_class == {FailureClass.LOST: job.lost_count}
        if expected == JobStatus.PENDING:
            assert job.status == JobStatus.RUNNING and job.attempts == 2
    assert job.status == JobStatus.STUCK and job.lost_count == 2
    assert [a.failure_class for a in job.history] == ["lost", "lost"]
    engine.ctx.run_dir.release_lock()


async def test_an_unreadable_job_record_names_the_state_file(tmp_path: Path) -> None:
    engine, _ = await started(tmp_path, ["a"])
    with pytest.raises(RunDirError, match=r"queue_state\.json: a job record is unreadable"):
        engine.ctx.ledger.restore({"jobs": [{"id": "x"}]}, str(engine.run_dir.state_file))
    engine.ctx.run_dir.release_lock()
