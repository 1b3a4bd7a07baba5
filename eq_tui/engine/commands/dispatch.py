"""What a person can ask of a running queue: one dispatch table from command name to handler,
each answering with a typed CommandResult (per job "ok" or why not)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from eq_tui.api.client import CommandResult, SecretsAnswer
from eq_tui.api.command_result import result
from eq_tui.api.events import QueuePaused
from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.engine.commands.editing import Editing
from eq_tui.engine.commands.holds import Holds
from eq_tui.engine.tick.gpu_health import release as release_gpu
from eq_tui.errors import HostError
from eq_tui.manifest.secrets import take_secrets

if TYPE_CHECKING:
    from eq_tui.engine.engine import Engine

JobHandler = Callable[[JobState], Awaitable[str]]
__all__ = ["Commands", "result"]


ArgHandler = Callable[[list[str], dict[str, Any]], Awaitable[CommandResult]]

# A stopped session gets SIGTERM and up to 5 s before SIGKILL: jobs named together are stopped
# side by side (a few per host at once, so one SSH connection is not flooded with channels).
STOPS_PER_HOST = 8


class Commands:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ctx = engine.ctx
        holds, editing = Holds(self.ctx), Editing(self.ctx, engine)
        self.job_handlers: dict[str, JobHandler] = {
            "kill": self._kill, "retry": self._retry, "requeue": self._requeue,
            "hold": holds.hold, "release": holds.release}
        self.queue_handlers: dict[str, Callable[[], Awaitable[CommandResult]]] = {
            "pause": self._pause, "resume": self._resume, "shutdown": self._shutdown}
        # commands with arguments beyond job ids; each runs under the engine lock
        self.arg_handlers: dict[str, ArgHandler] = {
            "priority": holds.priority, **editing.handlers()}
        # targets are `HOST:GPU` strings, sent where job ids go
        self.gpu_handlers: dict[str, Callable[[str, int], str]] = {
            "release-gpu": lambda host, gpu: release_gpu(self.ctx, host, gpu)}
        self._stop_slots: dict[str, asyncio.Semaphore] = {}

    async def run(self, name: str, job_ids: list[str] | None = None,
                  args: dict[str, Any] | None = None,
                  command_id: str | None = None) -> CommandResult:
        return await self.ctx.commands.once(
            command_id, lambda: self._dispatch(name, job_ids or [], args or {}, command_id))

    async def _dispatch(self, name: str, job_ids: list[str], args: dict[str, Any],
                        command_id: str | None) -> CommandResult:
        queue_handler = self.queue_handlers.get(name)
        if queue_handler is not None:
            return await queue_handler()
        arg_handler = self.arg_handlers.get(name)
        if arg_handler is not None:
            async with self.engine.lock:
                done = await arg_handler(job_ids, args)
                self._written(command_id, done)
            self.engine.wake()
            return done
        if name in self.gpu_handlers:
            return await self._run_gpus(self.gpu_handlers[name], job_ids, command_id)
        handler = self.job_handlers.get(name)
        if handler is None:
            return result(error=f"unknown command {name!r}")
        if not job_ids:
            return result(error=f"{name} needs at least one job id")
        unique_ids = list(dict.fromkeys(job_ids))
        async with self.engine.lock:
            answers = await asyncio.gather(*(self._on_job(handler, job_id)
                                             for job_id in unique_ids))
            done = result(dict(zip(unique_ids, answers, strict=True)))
            self._written(command_id, done)
        self.engine.wake()
        return done

    async def _on_job(self, handler: JobHandler, job_id: str) -> str:
        job = self.ctx.ledger.jobs.get(job_id)
        if job is None:
            return "no such job"
        try:
            return await handler(job)
        except HostError as exc:
            return f"host error: {exc}"

    def _written(self, command_id: str | None, done: CommandResult) -> None:
        """The command's id goes to disk in the same write as the changes it made."""
        self.engine.check_finished()
        self.ctx.commands.remember(command_id, done)
        self.engine.persist_if_unsaved()

    async def _run_gpus(self, handler: Callable[[str, int], str], targets: list[str],
                        command_id: str | None) -> CommandResult:
        if not targets:
            return result(error="name at least one GPU as HOST:GPU")
        results: dict[str, str] = {}
        async with self.engine.lock:
            for target in targets:
                host, _, index = target.rpartition(":")
                results[target] = (handler(host, int(index)) if host and index.isdigit()
                                   else "not HOST:GPU")
            done = result(results)
            self._written(command_id, done)
        self.engine.wake()
        return done

    # ---- the queue -------------------------------------------------------------------------

    async def _set_paused(self, paused: bool) -> CommandResult:
        ctx = self.ctx
        async with self.engine.lock:
            ctx.paused = paused
            if not paused:
                ctx.crash_guard.release_all("resume")
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

    # ---- secrets, handed over while the engine runs -----------------------------------------

    async def take_secrets(self, values: dict[str, str], project: str) -> SecretsAnswer:
        """Not a logged command: its values must never reach the state file's command log."""
        async with self.engine.lock:
            taken = take_secrets(self.ctx.manifest, values, project)
            self.ctx.manifest = taken.manifest
            if taken.given:
                still = (f"; still missing: {', '.join(taken.missing)}" if taken.missing
                         else "; nothing missing now")
                self.ctx.bus.alert("info", f"secrets handed over the control socket: "
                                           f"{', '.join(taken.given)} (kept in memory only)"
                                           f"{still}")
        if taken.given:
            self.engine.wake()
        return {"given": taken.given, "refused": taken.refused, "missing": taken.missing,
                "error": taken.error}

    # ---- jobs ------------------------------------------------------------------------------

    async def _stop_attempt(self, job: JobState, why: FailureClass, text: str) -> None:
        """A person ends the running attempt: its session is stopped and it says why (`text`
        also goes to the attempt's log and exit record)."""
        if not job.status.is_active:
            return
        slots = self._stop_slots.setdefault(job.host or "", asyncio.Semaphore(STOPS_PER_HOST))
        async with slots:
            await self.engine.launcher.stop_session(job, text)
        current = job.current
        if current is not None:
            current.failure_class = why

    async def _kill(self, job: JobState) -> str:
        if job.status.is_finished:
            return f"already {job.status}"
        await self._stop_attempt(job, FailureClass.KILLED, "killed by the user")
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
            self.ctx.crash_guard.release(job.phase, f"retry of {job.id}")
            job.retry_base = job.attempts  # a fresh retry budget; attempts keep counting
            job.retries_by_class = {}
            job.min_gpu_mib = None  # a person may have changed what it asks for
            job.retry_at = None
            job.reason = None
            job.failure = None
            ledger.set_status(job, JobStatus.PENDING)
            return "ok"
        return f"cannot retry a {job.status} job"

    async def _requeue(self, job: JobState) -> str:
        if not job.status.is_active and job.status != JobStatus.FAILED_OOM:
            return f"cannot requeue a {job.status} job (only running ones)"
        await self._stop_attempt(job, FailureClass.REQUEUED, "requeued by the user")
        job.retry_at = None
        job.reason = "requeued by the user"
        self.ctx.ledger.set_status(job, JobStatus.PENDING)
        return "ok"
