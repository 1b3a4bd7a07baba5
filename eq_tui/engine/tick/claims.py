"""The engine's side of the hosts' GPU claims (hosts/claims.py): what a launch claims, placement
counting other engines' claims as held memory, and a launch the claims refused.

Another engine's job holds its GPU from its launch, not from when its memory shows: a claim on
a GPU alone makes the GPU busy; a shared claim adds what its job has not allocated yet to the
memory the GPU's reading shows (and to what someone else holds there). A launch that the claims
refuse (the host's check under its lock saw the GPUs taken) is undone: its attempt is dropped as
if it had never been decided, so it spends no attempt and is no failure, and the job waits to be
placed again with what the next probe shows.
"""

from __future__ import annotations

from dataclasses import replace

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.placement import GpuView
from eq_tui.hosts.base import HostSnapshot
from eq_tui.hosts.claim_types import ClaimTicket
from eq_tui.hosts.claims import known_on, others, pending_by_gpu


def ticket(ctx: RunContext, job: JobState, host: str, gpus: tuple[int, ...]) -> ClaimTicket:
    """What the launch of the job's current attempt claims: its estimate on each GPU (None:
    the GPUs alone), and the other engines' claims there that placement counted."""
    current = job.current
    record = ctx.hosts.get(host)
    snap = record.snapshot if record is not None else None
    theirs = others(snap.claims, ctx.project, ctx.token) if snap is not None else []
    lab = snap.lab if snap is not None else None
    return ClaimTicket(project=ctx.project, token=ctx.token,
                       mib=current.estimate_mib if current is not None else None,
                       known=known_on(theirs, gpus),
                       rules_sum=(lab.checksum or None) if lab is not None else None,
                       max_gpus=lab.rules.max_gpus_per_user
                       if lab is not None and lab.rules is not None else None)


def with_claims(gpus: tuple[GpuView, ...], snap: HostSnapshot | None, project: str,
                token: str) -> tuple[GpuView, ...]:
    """The GPU views with other engines' claims counted as held: a GPU claimed whole reads
    full; a shared claim adds what its job has not allocated yet."""
    if snap is None or not snap.claims:
        return gpus
    theirs = others(snap.claims, project, token)
    if not theirs:
        return gpus
    pending = pending_by_gpu(theirs, snap.gpus, snap.processes)
    views = []
    for view in gpus:
        if view.index not in pending:
            views.append(view)
            continue
        extra = pending[view.index]
        if extra is None:  # claimed whole: nothing is left for anyone
            full = view.memory_total_mib if view.memory_total_mib is not None else 1 << 30
            views.append(replace(view, memory_used_mib=max(view.memory_used_mib or 0, full),
                                 others_mib=full))
            continue
        views.append(replace(
            view,
            memory_used_mib=None if view.memory_used_mib is None
            else view.memory_used_mib + extra,
            others_mib=None if view.others_mib is None else view.others_mib + extra))
    return tuple(views)


def undo_refused(ctx: RunContext, job: JobState, why: str) -> None:
    """The host refused the launch of the job's current attempt (its claims, or GPUs that did
    not drain in time: drain_launch.py): nothing started, so the attempt is dropped (no
    attempt spent, no failure) and the job waits to be placed again."""
    current = job.current
    if current is None or job.status != JobStatus.LAUNCHING:
        return
    ledger = ctx.ledger
    ledger.update_attempt(current, launched=False)  # it never held its GPUs: nothing to release
    ledger.update(job, reason=f"launch refused by the host: {why}")
    ledger.set_status(job, JobStatus.PENDING, detail=f"launch refused: {why}")
    ledger.drop_attempt(job)
    ledger.changed(job)
