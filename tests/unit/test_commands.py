"""The commands a person sends (kill, retry, requeue, pause, resume, shutdown): one dispatch
table, a typed result per job. Fast: an in-memory host, no sessions."""

from __future__ import annotations

from pathlib import Path

from eq_tui.api.events import QueuePaused
from eq_tui.api.model import JobStatus
from tests.integration.test_ledger import drain, started
from tests.support.memory_host import MemoryHost


async def test_kill_stops_a_running_session_and_refuses_a_finished_job(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b"])
    await engine.tick()
    host.finish("b", 0)
    await engine.tick()
    result = await engine.command("kill", ["a", "b", "nope"])
    assert result == {"ok": False, "error": "some jobs were not changed",
                      "results": {"a": "ok", "b": "already completed", "nope": "no such job"}}
    job = engine.jobs["a"]
    assert host.kills == [job.history[0].session]
    assert job.status == JobStatus.KILLED and job.history[0].failure_class == "killed"
    assert job.ended == host.now
    engine.ctx.run_dir.release_lock()


async def test_retry_resets_a_stuck_job_and_refuses_a_running_one(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b"])
    await engine.tick()
    host.finish("a", 1, log="ValueError: nan")
    await engine.command("pause")
    await engine.tick()
    assert engine.jobs["a"].status == JobStatus.STUCK
    result = await engine.command("retry", ["a", "b"])
    assert result["results"] == {"a": "ok", "b": "cannot retry a running job"}
    job = engine.jobs["a"]
    # attempts keep counting launches; the retry budget starts again from here
    assert job.status == JobStatus.PENDING and (job.attempts, job.retry_base) == (1, 1)
    assert job.attempt_limit == 1 + engine.manifest.oom_retry.max_attempts
    assert (job.retries_by_class, job.failure, job.reason) == ({}, None, None)
    engine.ctx.run_dir.release_lock()


async def test_requeue_stops_the_session_and_the_next_tick_starts_attempt_two(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    assert (await engine.command("requeue", ["a"]))["ok"]
    job = engine.jobs["a"]
    assert job.status == JobStatus.PENDING and job.history[0].failure_class == "requeued"
    assert host.kills == [job.history[0].session]
    await engine.tick()
    assert job.status == JobStatus.RUNNING and job.current is not None and job.current.n == 2
    assert [r.attempt for r in host.launches] == [1, 2]
    engine.ctx.run_dir.release_lock()


async def test_nothing_launches_while_paused_and_resume_reopens_stopped_hosts(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    queue = engine.subscribe()
    assert (await engine.command("pause"))["ok"]
    await engine.tick()
    assert host.launches == [] and engine.jobs["a"].status == JobStatus.PENDING
    engine.ctx.hosts["m"].stopped = "disk full"
    assert (await engine.command("resume"))["ok"]
    paused = [e.paused for e in drain(queue) if isinstance(e, QueuePaused)]
    assert paused == [True, False]
    assert engine.ctx.hosts["m"].stopped is None
    await engine.tick()
    assert [r.job_id for r in host.launches] == ["a"]
    engine.ctx.run_dir.release_lock()


async def test_bad_commands_get_a_typed_error(tmp_path: Path) -> None:
    engine, _ = await started(tmp_path, ["a"])
    assert await engine.command("launch", ["a"]) == {
        "ok": False, "results": {}, "error": "unknown command 'launch'"}
    assert await engine.command("kill") == {
        "ok": False, "results": {}, "error": "kill needs at least one job id"}
    assert (await engine.command("shutdown"))["ok"]
    assert await engine.run() == 130  # stopped before the queue finished
    assert isinstance(engine.ctx.hosts["m"].host, MemoryHost)


async def test_requeues_spend_no_retry_an_oom_after_them_is_still_retried(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    job = engine.jobs["a"]
    budget = engine.manifest.oom_retry.max_attempts
    for n in range(1, budget + 1):  # as many requeues as the job has attempts
        await engine.tick()
        assert job.status == JobStatus.RUNNING and job.current is not None and job.current.n == n
        assert (await engine.command("requeue", ["a"]))["ok"]
    await engine.tick()
    host.finish("a", 1, log="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                            "2.00 GiB")
    await engine.tick()
    assert job.status == JobStatus.FAILED_OOM, (job.status, job.failure)
    assert job.attempt_limit == 2 * budget  # what the row shows: budget + 1 launches / 2x
    engine.ctx.run_dir.release_lock()
