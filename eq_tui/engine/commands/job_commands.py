"""kill, retry, requeue: what a person does to one job at a time (the dispatch runs them side by
side for the jobs one command names)."""

from __future__ import annotations

import asyncio

from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.engine.commands.door import Door
from eq_tui.engine.context import RunContext
from eq_tui.hosts.base import PERSON_STOP, Stop

# A stopped job gets SIGTERM and its grace (5 s unless the kill gives one) before SIGKILL: jobs
# named together are stopped side by side (a few per host at once, so one SSH connection is not
# flooded with channels).
STOPS_PER_HOST = 8


def kill_stop(grace: object) -> Stop:
    """A person's stop, with the grace a kill command gives (seconds; None: the default).
    ValueError saying why for one that is not 0 to 86400 seconds."""
    if grace is None:
        return PERSON_STOP
    if isinstance(grace, bool) or not isinstance(grace, int | float) or grace != grace:
        raise ValueError(f"grace must be a number of seconds, not {grace!r}")
    return Stop(grace_s=float(grace))


class JobCommands:
    def __init__(self, ctx: RunContext, door: Door) -> None:
        self.ctx = ctx
        self.door = door
        self._stop_slots: dict[str, asyncio.Semaphore] = {}

    async def _stop_attempt(self, job: JobState, why: FailureClass, text: str,
                            stop: Stop = PERSON_STOP) -> None:
        """A person ends the running attempt: its session is stopped as `stop` says and it says
        why (`text` also goes to the attempt's log and exit record)."""
        if not job.status.is_active:
            return
        slots = self._stop_slots.setdefault(job.host or "", asyncio.Semaphore(STOPS_PER_HOST))
        async with slots:
            await self.door.stop_session(job, text, stop)
        current = job.current
        if current is not None:
            self.ctx.ledger.update_attempt(current, failure_class=why)

    async def kill(self, job: JobState, stop: Stop = PERSON_STOP) -> str:
        if job.status.is_finished:
            return f"already {job.status}"
        await self._stop_attempt(job, FailureClass.KILLED, "killed by the user", stop)
        self.ctx.ledger.update(job, retry_at=None, reason="killed by the user")
        self.ctx.ledger.set_status(job, JobStatus.KILLED, failure_class=FailureClass.KILLED,
                                   detail="killed by the user")
        return "ok"

    async def retry(self, job: JobState) -> str:
        ledger = self.ctx.ledger
        if job.status == JobStatus.FAILED_OOM:
            ledger.update(job, retry_at=self.ctx.clock())
            ledger.changed(job)
            return "ok"
        if job.status == JobStatus.PRUNED:
            # a person wants it to the end: early stopping leaves it be
            ledger.update(job, run_to_end=True, reason=None)
            ledger.set_status(job, JobStatus.PENDING)
            return "ok"
        if job.status.needs_person:
            self.ctx.crash_guard.release(job.phase, f"retry of {job.id}")
            # a fresh retry budget (attempts keep counting); a person may have changed what
            # it asks for
            ledger.update(job, retry_base=job.attempts, retries_by_class={}, min_gpu_mib=None,
                          retry_at=None, reason=None, failure=None)
            ledger.set_status(job, JobStatus.PENDING)
            return "ok"
        return f"cannot retry a {job.status} job"

    async def requeue(self, job: JobState) -> str:
        if not job.status.is_active and job.status != JobStatus.FAILED_OOM:
            return f"cannot requeue a {job.status} job (only running ones)"
        stopped = job.status.is_active
        await self._stop_attempt(job, FailureClass.REQUEUED, "requeued by the user")
        # the attempt it stopped spent no retry: the budget moves on by that launch
        self.ctx.ledger.update(job, retry_at=None, reason="requeued by the user",
                               retry_base=job.retry_base + (1 if stopped else 0))
        self.ctx.ledger.set_status(job, JobStatus.PENDING)
        return "ok"
