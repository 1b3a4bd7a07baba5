"""Which jobs to launch where, now. A pure function of jobs, host views and the clock.

At 10,000 jobs a tick must stay cheap: jobs are sorted into the few groups a decision needs
in one pass (or none, when no GPU could take a job and no phase can be blocked), and only the
jobs that could launch are looked at after that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eq_tui.engine.model import (
    ACTIVE,
    FINISHED,
    NEEDS_PERSON,
    WAITING,
    JobState,
    JobStatus,
)
from eq_tui.engine.packing import MemoryPlacer, MemoryPlan
from eq_tui.engine.placement import (
    GpuView,
    HostView,
    Launch,
    OnePerGpu,
    Placer,
    free_gpus,
    gpu_holders,
    quiet_gpus,
)
from eq_tui.manifest.model import JobSpec, Manifest
from eq_tui.manifest.secrets import missing_reason

__all__ = ["Decision", "GpuView", "HostView", "Launch", "PhaseGate", "PhaseLimit", "decide",
           "free_gpus", "gpu_holders", "phase_gates"]


@dataclass
class Decision:
    launches: list[Launch] = field(default_factory=list)
    block: dict[str, str] = field(default_factory=dict)  # job id -> reason (dependency failed)
    waiting: dict[str, str] = field(default_factory=dict)  # job id -> why it is not launched
    check_preconditions: list[str] = field(default_factory=list)  # ask the next probe


@dataclass(frozen=True)
class PhaseLimit:
    """At most `left` more launches of a phase now (the crash guard); `why` says so."""

    left: int
    why: str


@dataclass(frozen=True)
class PhaseGate:
    ready: bool
    blocked_reason: str | None = None


@dataclass
class _PhaseSummary:
    """What a dependent phase needs to know about one of its dependencies."""

    first_failed: JobState | None = None
    unfinished: bool = False


def _dependencies(manifest: Manifest) -> frozenset[str]:
    return frozenset(dep for phase in manifest.phases for dep in phase.depends_on)


def _summarise(jobs: Sequence[JobState], phases: frozenset[str]) -> dict[str, _PhaseSummary]:
    summaries = {name: _PhaseSummary() for name in phases}
    if not phases:
        return summaries
    for job in jobs:
        summary = summaries.get(job.phase)
        if summary is None:
            continue
        if job.status in NEEDS_PERSON:
            if summary.first_failed is None:
                summary.first_failed = job
        elif job.status not in FINISHED:
            summary.unfinished = True
    return summaries


def _gates(manifest: Manifest, summaries: Mapping[str, _PhaseSummary]) -> dict[str, PhaseGate]:
    gates: dict[str, PhaseGate] = {}
    for phase in manifest.phases:
        ready = True
        reason = None
        for dep in phase.depends_on:
            summary = summaries.get(dep) or _PhaseSummary()
            failed = summary.first_failed
            if failed is not None and phase.on_dependency_failure == "block":
                reason = f"phase {dep}: {failed.id} ended {failed.status}"
                ready = False
                break
            if summary.unfinished:
                ready = False
        gates[phase.name] = PhaseGate(ready=ready, blocked_reason=reason)
    return gates


def phase_gates(manifest: Manifest, jobs: Sequence[JobState]) -> dict[str, PhaseGate]:
    """For every phase: may its jobs start, or are they blocked by a failed dependency?"""
    return _gates(manifest, _summarise(jobs, _dependencies(manifest)))


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
    specs: Mapping[str, JobSpec] | None = None,
    limits: Mapping[str, PhaseLimit] | None = None,
    memory: MemoryPlan | None = None,
) -> Decision:
    """Launch decisions for this tick.

    `preconditions` holds this tick's probe results for jobs whose preconditions were checked;
    a job with preconditions launches only on a fresh positive result. `specs`: every job's
    definition (the manifest's and those made at run time; default the manifest's). Waiting
    jobs are taken by priority, higher first, ties in queue order (held jobs never). `limits`
    caps the launches of some phases (a phase held by the crash guard gets none). `memory`:
    jobs are placed by memory (packing.py), several to a GPU where they fit; None: every job
    takes its GPUs alone.
    """
    decision = Decision()
    secrets_missing = missing_reason(manifest)
    if secrets_missing is not None:
        return _without_secrets(manifest, jobs, secrets_missing)
    threshold = manifest.gpu_free_threshold_mib
    dependencies = _dependencies(manifest)
    quiet = {h.name: quiet_gpus(h, threshold) for h in hosts}
    if not dependencies and (paused or (memory is None and not any(quiet.values()))):
        return decision  # nothing can be blocked and no GPU can take a job: no job to look at

    waiting: list[JobState] = []  # pending or failed_oom, in manifest order
    active: list[JobState] = []
    prioritised = False
    for job in jobs:
        status = job.status
        if status in WAITING:  # the sets, not the predicates: this loop sees every job
            waiting.append(job)
            if job.priority:  # (cheaper than `prioritised or job.priority != 0` per job)
                prioritised = True
        elif status in ACTIVE:
            active.append(job)
    gates = _gates(manifest, _summarise(jobs, dependencies))
    blocked_phases = {name: gate.blocked_reason for name, gate in gates.items()
                      if gate.blocked_reason}
    if blocked_phases:
        for job in waiting:
            reason = blocked_phases.get(job.phase)
            if reason and job.status == JobStatus.PENDING:
                decision.block[job.id] = reason

    if paused:
        return decision
    if manifest.waves == "strict" and active:
        return decision
    specs = manifest.job_specs if specs is None else specs
    seats: list[tuple[list[JobState], Placer]]
    if memory is None:
        seats = [(waiting, OnePerGpu(hosts, quiet, active))]
    else:  # CPU-only jobs never wait behind GPU jobs: they have a queue of their own
        placer = MemoryPlacer(manifest, hosts, active, memory, specs)
        seats = [([job for job in waiting if _gpus_of(job, specs) != 0], placer.gpu_seat),
                 ([job for job in waiting if _gpus_of(job, specs) == 0], placer.cpu_seat)]
    seats = [(queue, seat) for queue, seat in seats if queue and seat.capacity() > 0]
    if not seats:
        return decision
    left = {name: limit.left for name, limit in (limits or {}).items()}
    for queue, seat in seats:
        if prioritised:  # a stable sort: ties keep queue order; skipped when no job has one
            queue.sort(key=_minus_priority)
        _launch_from(seat.order(queue), seat, decision, gates=gates, left=left, limits=limits or {},
                     specs=specs, now=now, preconditions=preconditions)
    return decision


def _without_secrets(manifest: Manifest, jobs: Sequence[JobState], reason: str) -> Decision:
    """Every job gets the manifest's env: without one of its secrets none launches; blocked
    phases still block."""
    decision = Decision()
    gates = _gates(manifest, _summarise(jobs, _dependencies(manifest)))
    for job in jobs:
        if job.status not in WAITING:
            continue
        blocked = gates[job.phase].blocked_reason if job.phase in gates else None
        if blocked and job.status == JobStatus.PENDING:
            decision.block[job.id] = blocked
        else:
            decision.waiting[job.id] = reason
    return decision


def _minus_priority(job: JobState) -> int:
    return -job.priority


def _gpus_of(job: JobState, specs: Mapping[str, JobSpec]) -> int | None:
    spec = specs.get(job.id)
    return spec.gpus_per_job if spec is not None else None


def _launch_from(waiting: Sequence[JobState], placer: Placer, decision: Decision, *,
                 gates: Mapping[str, PhaseGate], left: dict[str, int],
                 limits: Mapping[str, PhaseLimit], specs: Mapping[str, JobSpec], now: float,
                 preconditions: Mapping[str, bool]) -> None:
    """Launch what fits from `waiting`, in order, looking at no more jobs than a few times
    what can launch now (with 10,000 waiting, a tick must not look at them all)."""
    capacity = placer.capacity()
    lookahead = max(4, 2 * capacity)
    for job in waiting:
        if capacity == 0 or lookahead == 0:
            break
        if job.id in decision.block or not _is_due(job, now):
            continue
        gate = gates.get(job.phase)
        if gate is not None and not gate.ready:
            continue
        if left.get(job.phase, 1) <= 0:
            decision.waiting[job.id] = limits[job.phase].why
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
        placed = placer.place(job, spec)
        if isinstance(placed, str):
            decision.waiting[job.id] = placed
            continue
        decision.launches.append(placed)
        if job.phase in left:
            left[job.phase] -= 1
        capacity = placer.capacity()
