"""Which jobs to launch where, now. A pure function of jobs, host views and the clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eq_tui.engine.model import ACTIVE, JobState, JobStatus
from eq_tui.manifest.model import Manifest


@dataclass(frozen=True)
class GpuView:
    index: int
    memory_used_mib: int | None


@dataclass(frozen=True)
class HostView:
    """What the scheduler may know about a host this tick."""

    name: str
    usable: bool  # reachable, probed this tick, not stopped (disk full, key refused)
    gpus: tuple[GpuView, ...]
    allowed: frozenset[int] | None  # None: every GPU it reports
    max_parallel: int
    quarantined: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Launch:
    job_id: str
    host: str
    gpus: tuple[int, ...]


@dataclass
class Decision:
    launches: list[Launch] = field(default_factory=list)
    block: dict[str, str] = field(default_factory=dict)  # job id -> reason (dependency failed)
    waiting: dict[str, str] = field(default_factory=dict)  # job id -> why it is not launched
    check_preconditions: list[str] = field(default_factory=list)  # ask the next probe


@dataclass(frozen=True)
class PhaseGate:
    ready: bool
    blocked_reason: str | None = None


def phase_gates(manifest: Manifest, jobs: Sequence[JobState]) -> dict[str, PhaseGate]:
    """For every phase: may its jobs start, or are they blocked by a failed dependency?"""
    by_phase: dict[str, list[JobState]] = {}
    for job in jobs:
        by_phase.setdefault(job.phase, []).append(job)
    gates: dict[str, PhaseGate] = {}
    for phase in manifest.phases:
        ready = True
        reason = None
        for dep in phase.depends_on:
            dep_jobs = by_phase.get(dep, [])
            failed = [j for j in dep_jobs
                      if j.status in (JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED)]
            unfinished = [j for j in dep_jobs if j.status not in
                          (JobStatus.COMPLETED, JobStatus.STUCK, JobStatus.KILLED,
                           JobStatus.BLOCKED)]
            if failed and phase.on_dependency_failure == "block":
                reason = f"phase {dep}: {failed[0].id} ended {failed[0].status}"
                ready = False
                break
            if unfinished:
                ready = False
        gates[phase.name] = PhaseGate(ready=ready, blocked_reason=reason)
    return gates


def gpu_holders(jobs: Sequence[JobState]) -> dict[tuple[str, int], str]:
    """(host, gpu) -> job id, for every job of ours that still holds a GPU."""
    held: dict[tuple[str, int], str] = {}
    for job in jobs:
        if job.status in ACTIVE and job.host is not None:
            for gpu in job.gpus:
                held[(job.host, gpu)] = job.id
    return held


def free_gpus(host: HostView, held: Mapping[tuple[str, int], str], threshold_mib: int) -> list[int]:
    """GPUs of `host` that are allowed, below the memory threshold, and held by no job of ours."""
    if not host.usable:
        return []
    free = []
    for gpu in host.gpus:
        if host.allowed is not None and gpu.index not in host.allowed:
            continue
        if gpu.index in host.quarantined or (host.name, gpu.index) in held:
            continue
        if gpu.memory_used_mib is None or gpu.memory_used_mib >= threshold_mib:
            continue
        free.append(gpu.index)
    return free


def _is_due(job: JobState, now: float) -> bool:
    if job.status == JobStatus.PENDING:
        return job.retry_at is None or job.retry_at <= now
    if job.status == JobStatus.FAILED_OOM:
        return job.retry_at is not None and job.retry_at <= now
    return False


def decide(
    manifest: Manifest,
    jobs: Sequence[JobState],
    hosts: Sequence[HostView],
    *,
    now: float,
    paused: bool,
    preconditions: Mapping[str, bool],
) -> Decision:
    """Launch decisions for this tick.

    `preconditions` holds this tick's probe results for jobs whose preconditions were checked;
    a job with preconditions launches only on a fresh positive result.
    """
    decision = Decision()
    specs = {spec.id: spec for spec in manifest.jobs}
    gates = phase_gates(manifest, jobs)

    for job in jobs:
        if job.status == JobStatus.PENDING:
            gate = gates.get(job.phase)
            if gate is not None and gate.blocked_reason:
                decision.block[job.id] = gate.blocked_reason

    held = gpu_holders(jobs)
    active_per_host: dict[str, int] = {}
    for job in jobs:
        if job.status in ACTIVE and job.host is not None:
            active_per_host[job.host] = active_per_host.get(job.host, 0) + 1
    if paused:
        return decision
    if manifest.waves == "strict" and any(job.status in ACTIVE for job in jobs):
        return decision

    free: dict[str, list[int]] = {h.name: free_gpus(h, held, manifest.gpu_free_threshold_mib)
                                  for h in hosts}
    slots = {h.name: max(0, h.max_parallel - active_per_host.get(h.name, 0)) for h in hosts}
    capacity = sum(min(len(free[h.name]), slots[h.name]) for h in hosts)
    if capacity == 0:
        return decision

    lookahead = max(4, 2 * capacity)
    for job in jobs:
        if capacity == 0 or lookahead == 0:
            break
        if job.id in decision.block or not _is_due(job, now):
            continue
        gate = gates.get(job.phase)
        if gate is not None and not gate.ready:
            continue
        spec = specs.get(job.id)
        if spec is None:
            continue
        lookahead -= 1
        if spec.preconditions:
            result = preconditions.get(job.id)
            if result is None:
                decision.check_preconditions.append(job.id)
                decision.waiting[job.id] = "checking preconditions"
                continue
            if not result:
                decision.check_preconditions.append(job.id)
                paths = ", ".join(p.path for p in spec.preconditions)
                decision.waiting[job.id] = f"precondition not met: {paths}"
                continue
        placed = _place(job, spec.gpus_per_job, hosts, free, slots)
        if placed is None:
            decision.waiting[job.id] = f"waiting for {spec.gpus_per_job} free GPU(s) on one host"
            continue
        host_name, gpus = placed
        decision.launches.append(Launch(job.id, host_name, gpus))
        for gpu in gpus:
            free[host_name].remove(gpu)
        slots[host_name] -= 1
        capacity = sum(min(len(free[h.name]), slots[h.name]) for h in hosts)
    return decision


def _place(job: JobState, count: int, hosts: Sequence[HostView], free: Mapping[str, list[int]],
           slots: Mapping[str, int]) -> tuple[str, tuple[int, ...]] | None:
    """Pick GPUs the job did not just fail on when possible, then the host with the most free
    GPUs (spreading load), then manifest order."""
    avoid: set[tuple[str, int]] = set()
    last = job.current
    if last is not None:
        avoid = {(last.host, gpu) for gpu in last.gpus}
    best: tuple[tuple[int, int, int], str, tuple[int, ...]] | None = None
    for order, host in enumerate(hosts):
        candidates = free.get(host.name, [])
        if slots.get(host.name, 0) <= 0 or len(candidates) < count:
            continue
        fresh = [g for g in candidates if (host.name, g) not in avoid]
        chosen = tuple(fresh[:count]) if len(fresh) >= count else tuple(candidates[:count])
        reused = any((host.name, g) in avoid for g in chosen)
        rank = (1 if reused else 0, -len(candidates), order)
        if best is None or rank < best[0]:
            best = (rank, host.name, chosen)
    if best is None:
        return None
    return best[1], best[2]
