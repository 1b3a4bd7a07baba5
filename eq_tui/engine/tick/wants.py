"""What this engine's probes tell each host of its waiting, for fair turns (_fair_turns.sh: a
freed GPU, or freed room on a shared one, goes first to the waiting engine that holds the least
of the host's GPU memory and could use it): whether a job waits for GPUs, which GPUs it may use
there (the host entry's, less those the lab's rules keep from it) and what its waiting jobs
need, so that no engine holds a GPU back for one that could not take it. Looked at once per
change of the jobs, whatever the number of hosts."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.memory import ESCALATION, learned_estimate
from eq_tui.hosts.claims import WaitingNeed, want_arg
from eq_tui.hosts.lab_rules import closed_gpus, user_cap
from eq_tui.manifest.model import JobSpec, Manifest


def due_at(job: JobState) -> float | None:
    """When the job waits to be placed (as the ledger's any_job_due): -inf now, its retry time,
    or None (it does not wait)."""
    if job.status == JobStatus.PENDING:
        return -math.inf if job.retry_at is None else job.retry_at
    if job.status == JobStatus.FAILED_OOM and job.retry_at is not None:
        return job.retry_at
    return None


def share_need(job: JobState, spec: JobSpec) -> int | None:
    """What the job asks on each GPU it shares (tick/memory.py's need, without this tick's
    family peaks); None: it wants its GPUs alone. -1: not known yet."""
    if spec.mem_mib is None or spec.exclusive or job.mem_escalation >= 2:
        return None
    if spec.mem_mib == "auto":
        own = max((a.peak_mib or 0 for a in job.history), default=0)
        if not own:
            return -1
        base = learned_estimate(own)
    else:
        base = spec.mem_mib
    return int(base * ESCALATION + 0.999) if job.mem_escalation >= 1 else base


def waiting_need(manifest: Manifest, jobs: Iterable[tuple[JobState, JobSpec | None]],
                 now: float) -> tuple[bool, WaitingNeed | None]:
    """Whether a job waits for GPUs, and the least its waiting jobs need (None: not known)."""
    waiting, need, _ = waiting_need_until(manifest, jobs, now)
    return waiting, need


def waiting_need_until(manifest: Manifest, jobs: Iterable[tuple[JobState, JobSpec | None]],
                       now: float) -> tuple[bool, WaitingNeed | None, float]:
    """waiting_need, and until when it holds while no job changes (the next retry coming due;
    inf: none)."""
    count: int | None = None
    share: int | None = None
    alone = False
    known = True
    until = math.inf
    for job, spec in jobs:
        if spec is None or spec.gpus_per_job == 0:
            continue
        when = due_at(job)
        if when is None:
            continue
        if when > now:
            until = min(until, when)
            continue
        count = spec.gpus_per_job if count is None else min(count, spec.gpus_per_job)
        need = share_need(job, spec)
        if need is None:
            alone = True
        elif need < 0:
            known = False
        else:
            share = need if share is None else min(share, need)
    if count is None:
        return False, None, until
    if not known:
        return True, None, until
    return True, WaitingNeed(
        count=count,
        share_mib=None if share is None else share + manifest.gpu_margin_mib,
        alone_below_mib=manifest.gpu_free_threshold_mib if alone else None), until


class Wants:
    """One pass over the jobs per change of them (or a retry coming due), not per probe."""

    def __init__(self, ctx: RunContext, poll: Callable[[], float]) -> None:
        self.ctx = ctx
        self.poll = poll
        # the jobs' change key it was worked out for, until when it holds, and the want
        self._last: tuple[object, float, bool, WaitingNeed | None] | None = None

    def arg(self, host: str) -> str:
        ledger = self.ctx.ledger
        now = self.ctx.clock()
        key = (ledger.change_key(), ledger.specs_version)
        last = self._last
        if last is None or key != last[0] or now >= last[1]:
            waiting, need, until = waiting_need_until(
                self.ctx.manifest, ((job, ledger.specs.get(job.id))
                                    for job in ledger.jobs.values()), now)
            last = self._last = (key, until, waiting, need)
        return want_arg(self.ctx.project, self.ctx.token, waiting=last[2],
                        poll_s=self.poll(), gpus=self.usable(host), need=last[3])

    def usable(self, host: str) -> frozenset[int] | None:
        """The GPUs we may use on the host (None: all): the host entry's, less those the lab's
        rules keep from us by its last probe."""
        record = self.ctx.hosts[host]
        snap = record.snapshot
        lab = snap.lab if snap is not None else None
        if snap is None or lab is None or lab.rules is None:
            return record.allowed
        every = frozenset(gpu.index for gpu in snap.gpus)
        allowed = (record.allowed if record.allowed is not None else every) \
            - closed_gpus(lab, host).keys()
        held = {claim.gpu for claim in snap.claims if claim.user == lab.user}
        if user_cap(lab, host, held) is not None:
            allowed &= held
        return frozenset(allowed)
