"""Holds and priorities: a held job never launches until it is released; a job's priority
orders the waiting jobs (higher first). Both are in the job's record, so a restart keeps them."""

from __future__ import annotations

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.commands import SetPriority
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext

MAX_PRIORITY = 10**9


class Holds:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    async def hold(self, job: JobState) -> str:
        status = job.status
        if status.is_held:
            return "already held"
        if status.is_active:
            return f"{status}: kill or requeue it first (a held job is one that waits)"
        if status.is_finished:
            return f"already {status}"
        # an OOM retry's wait starts over on release
        self.ctx.ledger.update(job, retry_at=None, reason="held by a person")
        self.ctx.ledger.set_status(job, JobStatus.HELD)
        return "ok"

    async def release(self, job: JobState) -> str:
        if not job.status.is_held:
            return f"not held ({job.status})"
        self.ctx.ledger.update(job, reason=None)
        self.ctx.ledger.set_status(job, JobStatus.PENDING)
        return "ok"

    async def priority(self, command: SetPriority) -> CommandResult:
        """`priority` sets it, `delta` moves it (the UI's +/-)."""
        job_ids, value, delta = list(command.job_ids), command.priority, command.delta
        if not job_ids:
            return result(error="priority needs at least one job id")
        for name, given in (("priority", value), ("delta", delta)):
            if given is not None and (not isinstance(given, int) or isinstance(given, bool)
                                      or abs(given) > MAX_PRIORITY):
                return result(error=f"{name} must be a whole number, at most {MAX_PRIORITY} "
                                    f"either way (got {given!r})")
        if (value is None) == (delta is None):
            return result(error="priority needs a value or a delta")
        results: dict[str, str] = {}
        for job_id in job_ids:
            job = self.ctx.ledger.jobs.get(job_id)
            if job is None:
                results[job_id] = "no such job"
                continue
            self.ctx.ledger.update(job, priority=value if value is not None else max(
                -MAX_PRIORITY, min(MAX_PRIORITY, job.priority + int(delta or 0))),
                priority_set=True)
            self.ctx.ledger.changed(job)
            results[job_id] = "ok"
        return result(results, detail={"priority": {j: self.ctx.ledger.jobs[j].priority
                                                    for j, r in results.items() if r == "ok"}})
