"""Resuming from a checkpoint: a restart of a job with a `checkpoint:` contract (any attempt
after one that ran: an OOM retry, a requeue, a retry, a stall restart, a run started again)
resumes from the newest complete checkpoint its path matches on its host. Right before the
session starts, the host lists the files (hosts/checkpoints.py); the newest that is not empty,
not growing and not one a resume has failed on is appended to the command through the contract's
`resume` (quoted), and the attempt records it. None found: the job starts from scratch and
says so, once a job. A host that cannot list them fails the launch like any host error (the
probe decides, and nothing starts twice): a restart never drops a checkpoint on a guess.

A resume that fails at once (an exit the job would be stuck for, before any progress of its
own: the newest checkpoint is corrupt) falls back: that checkpoint is never chosen again, and
the job goes back to pending to resume from the one before it, then from scratch."""

from __future__ import annotations

import shlex
from dataclasses import replace

from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.judge import Verdict
from eq_tui.hosts.base import LaunchRequest
from eq_tui.hosts.checkpoints import list_checkpoints, newest
from eq_tui.manifest.checkpoint_keys import PLACEHOLDER
from eq_tui.manifest.model import CheckpointSpec


class Resumes:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._told_none: set[str] = set()  # jobs told they start from scratch

    def contract(self, job: JobState, n: int) -> CheckpointSpec | None:
        """The job's contract when attempt `n` is a restart: an earlier attempt ran."""
        spec = self.ctx.ledger.specs.get(job.id)
        if spec is None or spec.checkpoint is None:
            return None
        if not any(a.launched and a.n < n for a in job.history):
            return None
        return spec.checkpoint

    async def prepare(self, job: JobState, request: LaunchRequest, glob: str,
                      resume: str) -> LaunchRequest:
        """The request with the resume arguments of the newest checkpoint, if there is one.
        `glob` and `resume` are the contract's, rendered for this launch."""
        ctx = self.ctx
        host = job.host or ""
        runner = getattr(ctx.hosts[host].host, "runner", None)
        if runner is None:
            return request
        files = await list_checkpoints(runner, request.cwd, glob, host=host)
        chosen = newest(files, job.failed_checkpoints)
        if chosen is None:
            if job.id not in self._told_none:
                self._told_none.add(job.id)
                failed = (f" (a resume failed on {', '.join(job.failed_checkpoints)})"
                          if job.failed_checkpoints else "")
                ctx.bus.alert("info", f"{job.id}: no checkpoint matches {glob!r} in "
                              f"{request.cwd or '~'} on {host}{failed}: attempt "
                              f"{request.attempt} starts from scratch", host=host, job=job.id)
            return request
        args = resume.replace(PLACEHOLDER, shlex.quote(chosen.path))
        return replace(request, cmd=f"{request.cmd} {args}", resumed_from=chosen.path)


def fallback(job: JobState, attempt: Attempt, verdict: Verdict) -> Verdict:
    """The verdict on an attempt's exit, given that it may have resumed from a checkpoint."""
    checkpoint = attempt.resumed_from
    progressed = job.progress_attempt == attempt.n and job.progress is not None \
        and job.progress.get("fraction") is not None
    if checkpoint is None or verdict.status != JobStatus.STUCK or progressed:
        return verdict
    return Verdict(JobStatus.PENDING, str(FailureClass.RESUME_FAILED),
                   f"the resume from {checkpoint} failed before any progress "
                   f"({verdict.detail}): it falls back to the checkpoint before it")
