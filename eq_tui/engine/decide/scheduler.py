"""Which jobs to launch where, now. A pure function of jobs, host views and the clock.

At 10,000 jobs a tick must stay cheap: jobs are sorted into the few groups a decision needs
in one pass (or none, when no GPU could take a job and no phase can be blocked), and only the
jobs that could launch are looked at after that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from eq_tui.api.model import (
    ACTIVE,
    FINISHED,
    NEEDS_PERSON,
    WAITING,
    JobState,
    JobStatus,
)
from eq_tui.engine.decide.gpu_floor import floor_reason, larger_than, without
from eq_tui.engine.decide.packing import MemoryNeeds, MemoryPlacer
from eq_tui.engine.decide.placement import (
    GpuView,
    HostView,
    Launch,
    OnePerGpu,
    Placer,
    free_gpus,
    gpu_holders,
    no_room,
    quiet_gpus,
)
from eq_tui.engine.decide.waiting import (
    PAUSED,
    STRICT_WAVE,
    WaitContext,
    overtaken_by,
    phase_waits,
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
    # what the tick knew, to explain the jobs decide() did not reach: not part of what it
    # decided (a decision equals another by its launches, blocks, reasons and checks)
    context: WaitContext = field(default_factory=lambda: WaitContext(0.0), compare=False,
                                 repr=False)

    def shared_reason(self) -> str:
        """Why the GPU jobs decide() did not reach wait: the same for all of them."""
        return self.context.overall or self.context.queue

    def why_waiting(self, job: JobState) -> str | None:
        """Why a waiting job was not launched this tick (None: it is not waiting, was
        launched or blocked)."""
        if job.status not in WAITING or job.id in self.block:
            return None
        reason = self.waiting.get(job.id)
        if reason:
            return reason
        if job.id in self.context.launched:
            return None
        return self.context.why(job)


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
    memory: MemoryNeeds | None = None,
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
    limits = limits or {}
    secrets_missing = missing_reason(manifest)
    if secrets_missing is not None:
        return _without_secrets(manifest, jobs, secrets_missing)
    specs = manifest.job_specs if specs is None else specs
    context = decision.context = WaitContext(now, specs, phases={
        name: limit.why for name, limit in limits.items() if limit.left <= 0})
    threshold = manifest.gpu_free_threshold_mib
    dependencies = _dependencies(manifest)
    quiet = {h.name: quiet_gpus(h, threshold) for h in hosts}
    if not dependencies and (paused or (memory is None and not any(quiet.values()))):
        # nothing can be blocked and no GPU can take a job: no job to look at
        context.overall = PAUSED if paused else None
        context.queue = no_room(hosts, quiet, {})
        return decision

    waiting: list[JobState] = []  # pending or failed_oom, in manifest order
    active: list[JobState] = []
    prioritised = floored = False
    for job in jobs:
        status = job.status
        if status in WAITING:  # the sets, not the predicates: this loop sees every job
            waiting.append(job)
            if job.priority:  # (cheaper than `prioritised or job.priority != 0` per job)
                prioritised = True
            if job.min_gpu_mib is not None:
                floored = True
        elif status in ACTIVE:
            active.append(job)
    summaries = _summarise(jobs, dependencies)
    gates = _gates(manifest, summaries)
    blocked_phases = {name: gate.blocked_reason for name, gate in gates.items()
                      if gate.blocked_reason}
    context.phases.update(phase_waits(manifest.phases, {name: summary.unfinished
                                                        for name, summary in summaries.items()}))
    context.phases.update(blocked_phases)
    if blocked_phases:
        for job in waiting:
            reason = blocked_phases.get(job.phase)
            if reason and job.status == JobStatus.PENDING:
                decision.block[job.id] = reason

    if paused:
        context.overall = PAUSED
        return decision
    if manifest.waves == "strict" and active:
        context.overall = STRICT_WAVE
        return decision
    left = {name: limit.left for name, limit in limits.items()}
    seats = partial(_seats, manifest, active=active, memory=memory, specs=specs)
    launch = partial(_launch_from, decision=decision, gates=gates, left=left,
                     limits=limits, specs=specs, now=now, preconditions=preconditions)
    if floored:  # placed first: they can go only where the GPUs are large enough
        hosts = _launch_floored([job for job in waiting if job.min_gpu_mib is not None], hosts,
                                seats, launch, decision, now=now, prioritised=prioritised)
        waiting = [job for job in waiting if job.min_gpu_mib is None]
    for queue, seat in seats(hosts, waiting):
        if prioritised:  # a stable sort: ties keep queue order; skipped when no job has one
            queue.sort(key=_minus_priority)
        rest = launch(queue, seat)
        if rest:
            context.rest(rest, cpu=memory is not None and _gpus_of(queue[0], specs) == 0)
    for name, count in left.items():  # phases whose last launches the crash guard allowed
        if count <= 0:
            context.phases.setdefault(name, limits[name].why)
    context.launched = frozenset(x.job_id for x in decision.launches)
    return decision


Seats = Callable[[Sequence[HostView], list[JobState]], list[tuple[list[JobState], Placer]]]


def _seats(manifest: Manifest, hosts: Sequence[HostView], waiting: list[JobState], *,
           active: Sequence[JobState], memory: MemoryNeeds | None,
           specs: Mapping[str, JobSpec]) -> list[tuple[list[JobState], Placer]]:
    """The queues of waiting jobs and what places each (even with no room: it says why)."""
    seats: list[tuple[list[JobState], Placer]]
    if memory is None:
        quiet = {h.name: quiet_gpus(h, manifest.gpu_free_threshold_mib) for h in hosts}
        seats = [(waiting, OnePerGpu(hosts, quiet, active))]
    else:  # CPU-only jobs never wait behind GPU jobs: they have a queue of their own
        placer = MemoryPlacer(manifest, hosts, active, memory, specs)
        if memory.cpu_jobs:
            gpu_jobs, cpu_jobs = _gpu_and_cpu_jobs(waiting, specs)
            seats = [(gpu_jobs, placer.gpu_seat), (cpu_jobs, placer.cpu_seat)]
        else:
            seats = [(waiting, placer.gpu_seat)]
    return [(queue, seat) for queue, seat in seats if queue]


def _gpu_and_cpu_jobs(waiting: list[JobState], specs: Mapping[str, JobSpec]
                      ) -> tuple[list[JobState], list[JobState]]:
    """The waiting jobs that take GPUs (and those whose spec is gone), and those that take
    none, in queue order: one pass (a pass per queue with a call per job was two thirds of a
    decision over 10,000 jobs placed by memory)."""
    gpu_jobs: list[JobState] = []
    cpu_jobs: list[JobState] = []
    for job in waiting:
        spec = specs.get(job.id)
        (cpu_jobs if spec is not None and spec.gpus_per_job == 0 else gpu_jobs).append(job)
    return gpu_jobs, cpu_jobs


def _launch_floored(floored: list[JobState], hosts: Sequence[HostView], seats: Seats,
                    launch: Callable[[list[JobState], Placer], str | None], decision: Decision,
                    *, now: float, prioritised: bool) -> Sequence[HostView]:
    """Jobs that may go only to GPUs larger than their floor, the largest floor first; returns
    the hosts as the other jobs see them after these launches."""
    for floor in sorted({job.min_gpu_mib or 0 for job in floored}, reverse=True):
        queue = [job for job in floored if job.min_gpu_mib == floor]
        if prioritised:
            queue.sort(key=_minus_priority)
        before = len(decision.launches)
        for seat_queue, seat in seats(larger_than(hosts, floor), queue):
            launch(seat_queue, seat)
        hosts = without(hosts, decision.launches[before:])
        launched = {x.job_id for x in decision.launches[before:]}
        for job in queue:
            if job.id not in launched and job.id not in decision.block and _is_due(job, now):
                decision.waiting[job.id] = floor_reason(decision.waiting.get(job.id), floor)
    return hosts


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


def _launch_from(queue: list[JobState], placer: Placer, decision: Decision, *,
                 gates: Mapping[str, PhaseGate], left: dict[str, int],
                 limits: Mapping[str, PhaseLimit], specs: Mapping[str, JobSpec], now: float,
                 preconditions: Mapping[str, bool]) -> str | None:
    """Launch what fits from `queue`, in the placer's order, looking at no more jobs than a
    few times what can launch now (with 10,000 waiting, a tick must not look at them all).
    Returns why the jobs it did not reach wait (None: it reached them all)."""
    capacity = placer.capacity()
    if capacity == 0:
        return placer.full()
    waiting = placer.order(queue)
    lookahead = looked = max(4, 2 * capacity)
    for n, job in enumerate(waiting):
        if capacity == 0 or lookahead == 0:
            _note_overtaken(decision, queue, waiting[:n])
            return placer.full() if capacity == 0 else (
                f"in the queue behind the {looked} jobs looked at this tick")
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
    return None


def _note_overtaken(decision: Decision, queue: list[JobState],
                    looked_at: list[JobState]) -> None:
    """Jobs a bigger one passed in placement order, that the tick then did not reach."""
    launched = {launch.job_id for launch in decision.launches}
    first = next((job.id for job in looked_at if job.id in launched), None)
    ahead = f"{first} went first" if first else "bigger jobs ahead of it wait for room"
    decision.context.overtaken.update(overtaken_by(queue, looked_at, ahead))
