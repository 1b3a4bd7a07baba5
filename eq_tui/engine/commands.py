"""What a person can ask of a running queue: one dispatch table from command name to handler,
each answering with a typed CommandResult (per job "ok" or why not)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from eq_tui.engine.client import CommandResult
from eq_tui.engine.events import QueuePaused
from eq_tui.engine.gpu_health import release as release_gpu
from eq_tui.engine.model import FailureClass, JobState, JobStatus
from eq_tui.errors import HostError

if TYPE_CHECKING:
    from eq_tui.engine.engine import Engine

JobHandler = Callable[[JobState], Awaitable[str]]


def result(results: dict[str, str] | None = None, error: str | None = None) -> CommandResult:
    results = results or {}
    ok = error is None and all(value == "ok" for value in results.values())
    if not ok and error is None:
        error = "some jobs were not changed"
    return {"ok": ok, "results": results, "error": error}


class Commands:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ctx = engine.ctx
        self.job_handlers: dict[str, JobHandler] = {
            "kill": self._kill, "retry": self._retry, "requeue": self._requeue}
        self.queue_handlers: dict[str, Callable[[], Awaitable[CommandResult]]] = {
            "pause": self._pause, "resume": self._resume, "shutdown": self._shutdown}
        # targets are `HOST:GPU` strings, sent where job ids go
        self.gpu_handlers: dict[str, Callable[[str, int], str]] = {
            "release-gpu": lambda host, gpu: release_gpu(self.ctx, host, gpu)}

    async def run(self, name: str, job_ids: list[str] | None = None) -> CommandResult:
        queue_handler = self.queue_handlers.get(name)
        if queue_handler is not None:
            return await queue_handler()
        if name in self.gpu_handlers:
            return await self._run_gpus(self.gpu_handlers[name], job_ids or [])
        handler = self.job_handlers.get(name)
        if handler is None:
            return result(error=f"unknown command {name!r}")
        if not job_ids:
            return result(error=f"{name} needs at least one job id")
        results: dict[str, str] = {}
        async with self.engine.lock:
            for job_id in job_ids:
                job = self.ctx.ledger.jobs.get(job_id)
                if job is None:
                    results[job_id] = "no such job"
                    continue
                try:
                    results[job_id] = await handler(job)
                except HostError as exc:
                    results[job_id] = f"host error: {exc}"
            self.engine.check_finished()
            self.engine.persist_if_unsaved()
        self.engine.wake()
        return result(results)

    async def _run_gpus(self, handler: Callable[[str, int], str],
                        targets: list[str]) -> CommandResult:
        if not targets:
            return result(error="name at least one GPU as HOST:GPU")
        results: dict[str, str] = {}
        async with self.engine.lock:
            for target in targets:
                host, _, index = target.rpartition(":")
                results[target] = (handler(host, int(index)) if host and index.isdigit()
                                   else "not HOST:GPU")
            self.engine.persist_if_unsaved()
        self.engine.wake()
        return result(results)

    # ---- the queue -------------------------------------------------------------------------

    async def _set_paused(self, paused: bool) -> CommandResult:
        ctx = self.ctx
        async with self.engine.lock:
            ctx.paused = paused
            stopped = ctx.stopped_hosts()
            if not paused and stopped:
                ctx.bus.alert("info", "launching resumed on " + ", ".join(sorted(stopped)))
                for name in stopped:
                    ctx.hosts[name].stopped = None
            ctx.bus.publish(QueuePaused(project=ctx.project, at=ctx.clock(), paused=paused))
            self.engine.persistence.persist()
        self.engine.wake()
        return result()

    async def _pause(self) -> CommandResult:
        return await self._set_paused(True)

    async def _resume(self) -> CommandResult:
        return await self._set_paused(False)

    async def _shutdown(self) -> CommandResult:
        self.engine.request_stop()
        return result()

    # ---- jobs ------------------------------------------------------------------------------

    async def _kill(self, job: JobState) -> str:
        if job.status.is_finished:
            return f"already {job.status}"
        if job.status.is_active:
            await self.engine.launcher.stop_session(job)
            current = job.current
            if current is not None:
                current.failure_class = FailureClass.KILLED
        job.retry_at = None
        job.reason = "killed by the user"
        self.ctx.ledger.set_status(job, JobStatus.KILLED, failure_class=FailureClass.KILLED,
                                   detail="killed by the user")
        return "ok"

    async def _retry(self, job: JobState) -> str:
        ledger = self.ctx.ledger
        if job.status == JobStatus.FAILED_OOM:
            job.retry_at = self.ctx.clock()
            ledger.changed(job)
            return "ok"
        if job.status.needs_person:
            job.attempts = 0
            job.retries_by_class = {}
            job.retry_at = None
            job.reason = None
            job.failure = None
            ledger.set_status(job, JobStatus.PENDING)
            return "ok"
        return f"cannot retry a {job.status} job"

    async def _requeue(self, job: JobState) -> str:
        if not job.status.is_active and job.status != JobStatus.FAILED_OOM:
            return f"cannot requeue a {job.status} job (only running ones)"
        if job.status.is_active:
            await self.engine.launcher.stop_session(job)
            current = job.current
            if current is not None:
                current.failure_class = FailureClass.REQUEUED
        job.retry_at = None
        job.reason = "requeued by the user"
        self.ctx.ledger.set_status(job, JobStatus.PENDING)
        return "ok"
