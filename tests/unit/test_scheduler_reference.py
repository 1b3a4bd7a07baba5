"""The optimized decide() against a straightforward reference (every job looked at, every
time) on random small scenarios: the same launches, blocks, reasons and checks."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eq_tui.api.model import ACTIVE, Attempt, JobState, JobStatus
from eq_tui.engine.decide.scheduler import (
    Decision,
    GpuView,
    HostView,
    Launch,
    PhaseGate,
    decide,
    gpu_holders,
    phase_gates,
)
from eq_tui.manifest.model import JobSpec, Manifest, PhaseSpec, Precondition

# ---- the reference: the scheduler as first written, a scan of every job per question --------


def ref_phase_gates(manifest: Manifest, jobs: Sequence[JobState]) -> dict[str, PhaseGate]:
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
                          (JobStatus.COMPLETED, JobStatus.PRUNED, JobStatus.STUCK,
                           JobStatus.KILLED, JobStatus.BLOCKED)]
            if failed and phase.on_dependency_failure == "block":
                reason = f"phase {dep}: {failed[0].id} ended {failed[0].status}"
                ready = False
                break
            if unfinished:
                ready = False
        gates[phase.name] = PhaseGate(ready=ready, blocked_reason=reason)
    return gates


def ref_holders(jobs: Sequence[JobState]) -> dict[tuple[str, int], str]:
    held: dict[tuple[str, int], str] = {}
    for job in jobs:
        if job.status in ACTIVE and job.host is not None:
            for gpu in job.gpus:
                held[(job.host, gpu)] = job.id
    return held


def ref_free(host: HostView, held: Mapping[tuple[str, int], str], threshold: int) -> list[int]:
    if not host.usable:
        return []
    return [g.index for g in host.gpus
            if (host.allowed is None or g.index in host.allowed)
            and g.index not in host.quarantined and (host.name, g.index) not in held
            and g.memory_used_mib is not None and g.memory_used_mib < threshold]


def ref_is_due(job: JobState, now: float) -> bool:
    if job.status == JobStatus.PENDING:
        return job.retry_at is None or job.retry_at <= now
    if job.status == JobStatus.FAILED_OOM:
        return job.retry_at is not None and job.retry_at <= now
    return False


def ref_place(job: JobState, count: int, hosts: Sequence[HostView],
              free: Mapping[str, list[int]],
              slots: Mapping[str, int]) -> tuple[str, tuple[int, ...]] | None:
    avoid: set[tuple[str, int]] = set()
    if job.history:
        avoid = {(job.history[-1].host, gpu) for gpu in job.history[-1].gpus}
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
    return None if best is None else (best[1], best[2])


def ref_decide(manifest: Manifest, jobs: Sequence[JobState], hosts: Sequence[HostView], *,
               now: float, paused: bool, preconditions: Mapping[str, bool]) -> Decision:
    decision = Decision()
    specs = {spec.id: spec for spec in manifest.jobs}
    gates = ref_phase_gates(manifest, jobs)
    for job in jobs:
        gate = gates.get(job.phase)
        if job.status == JobStatus.PENDING and gate is not None and gate.blocked_reason:
            decision.block[job.id] = gate.blocked_reason
    held = ref_holders(jobs)
    active_per_host: dict[str, int] = {}
    for job in jobs:
        if job.status in ACTIVE and job.host is not None:
            active_per_host[job.host] = active_per_host.get(job.host, 0) + 1
    if paused:
        return decision
    if manifest.waves == "strict" and any(job.status in ACTIVE for job in jobs):
        return decision
    free = {h.name: ref_free(h, held, manifest.gpu_free_threshold_mib) for h in hosts}
    slots = {h.name: max(0, h.max_parallel - active_per_host.get(h.name, 0)) for h in hosts}

    def capacity() -> int:
        return sum(min(len(free[h.name]), slots[h.name]) for h in hosts)

    if capacity() == 0:
        return decision
    lookahead = max(4, 2 * capacity())
    for job in jobs:
        if capacity() == 0 or lookahead == 0:
            break
        if job.id in decision.block or not ref_is_due(job, now):
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
            if not result:
                decision.check_preconditions.append(job.id)
                decision.waiting[job.id] = (
                    "checking preconditions" if result is None else
                    "precondition not met: " + ", ".join(p.path for p in spec.preconditions))
                continue
        placed = ref_place(job, spec.gpus_per_job, hosts, free, slots)
        if placed is None:
            decision.waiting[job.id] = f"waiting for {spec.gpus_per_job} free GPU(s) on one host"
            continue
        decision.launches.append(Launch(job.id, placed[0], placed[1]))
        for gpu in placed[1]:
            free[placed[0]].remove(gpu)
        slots[placed[0]] -= 1
    return decision


# ---- random small scenarios --------------------------------------------------------------------

HOST_NAMES = ("a", "b", "c")
PHASES = ("p0", "p1", "p2")
STATUSES = [JobStatus.PENDING] * 12 + list(JobStatus)  # mostly jobs that could launch
# The scenarios are biased towards ones where something can launch (a roomy host and a ready
# job seven times in eight, the queue mostly not paused): 73 % of 1000 examples launch at
# least one job (it was 5-34 of 300 before the bias; `pytest -p no:xdist
# tests/unit/test_scheduler_reference.py --hypothesis-show-statistics` shows the "launches" event),
# while every branch (paused, strict waves, blocked phases, preconditions, no hosts) occurs.
EXAMPLES = int(os.environ.get("EQ_HYPOTHESIS_EXAMPLES", "300"))


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n_phases = draw(st.integers(1, 3))
    phases = []
    for i in range(n_phases):
        deps = tuple(draw(st.lists(st.sampled_from(PHASES[:i]), unique=True))) if i else ()
        phases.append(PhaseSpec(PHASES[i], depends_on=deps,
                                on_dependency_failure=draw(st.sampled_from(["block", "run"]))))
    n_jobs = draw(st.sampled_from([4, 8, 1, 2, 10, 0]))
    specs, jobs = [], []
    for i in range(n_jobs):
        phase = draw(st.sampled_from((PHASES[0], PHASES[0], *PHASES[:n_phases], "elsewhere")))
        pre = (Precondition(type="checkpoint_exists", path=f"ck{i}"),) if draw(
            st.integers(0, 5)) == 0 else ()
        spec = JobSpec(id=f"j{i}", phase=phase, cmd="run", preconditions=pre,
                       gpus_per_job=draw(st.integers(1, 2)))
        if draw(st.integers(0, 9)) > 0:  # now and then a job the manifest no longer has
            specs.append(spec)
        job = JobState(id=spec.id, phase=phase, cmd="run",
                       status=draw(st.sampled_from(STATUSES)))
        job.retry_at = draw(st.sampled_from([None, None, None, 5.0, 10.0, 15.0]))
        # where a job runs is its current attempt's: an active job always has one
        if job.status in ACTIVE or draw(st.booleans()):
            job.history.append(Attempt(n=1, host=draw(st.sampled_from(HOST_NAMES)),
                                       gpus=draw(st.lists(st.integers(0, 3), min_size=1,
                                                          max_size=2, unique=True)),
                                       session="s", attempt_dir="d", log="l"))
        jobs.append(job)
    hosts = []
    n_hosts = draw(st.sampled_from([1, 2, 3, 1, 2, 0]))
    for name in draw(st.lists(st.sampled_from(HOST_NAMES), min_size=n_hosts,
                              max_size=n_hosts)):
        n_gpus = draw(st.sampled_from([4, 2, 3, 1, 0]))
        gpus = tuple(GpuView(g, draw(st.sampled_from([0] * 6 + [499, 500, 9000, None])))
                     for g in range(n_gpus))
        hosts.append(HostView(
            name=name, usable=draw(st.sampled_from([True] * 9 + [False])), gpus=gpus,
            allowed=draw(st.sampled_from([None, None, None, 1]).flatmap(
                lambda a: st.none() if a is None else st.frozensets(st.integers(0, 3)))),
            max_parallel=draw(st.sampled_from([4, 2, 3, 1, 0])),
            quarantined=draw(st.frozensets(st.integers(0, 3), max_size=1))))
    if not (draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans())):
        # seven times in eight, a host with room and a job ready to go somewhere in the queue
        # (random hosts and statuses alone rarely leave anything launchable)
        hosts.insert(draw(st.integers(0, len(hosts))), HostView(
            name=draw(st.sampled_from(HOST_NAMES)), usable=True,
            gpus=tuple(GpuView(g, 0) for g in range(4)), allowed=None, max_parallel=4))
        ready = JobSpec(id=f"j{n_jobs}", phase=PHASES[0], cmd="run")
        specs.append(ready)
        jobs.insert(draw(st.integers(0, len(jobs))), JobState(id=ready.id, phase=ready.phase,
                                                               cmd="run"))
    manifest = Manifest(project="p", source="m", jobs=tuple(specs), phases=tuple(phases),
                        waves=draw(st.sampled_from(["rolling", "rolling", "rolling", "strict"])))
    preconditions = {f"j{i}": draw(st.booleans()) for i in range(n_jobs)
                     if draw(st.integers(0, 2)) == 0}
    return {"manifest": manifest, "jobs": jobs, "hosts": hosts,
            "now": draw(st.sampled_from([0.0, 10.0, 20.0])),
            "paused": draw(st.sampled_from([False] * 7 + [True])),
            "preconditions": preconditions}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_decide_matches_the_reference(case: dict[str, Any]) -> None:
    args = (case["manifest"], case["jobs"], case["hosts"])
    kwargs = {"now": case["now"], "paused": case["paused"],
              "preconditions": case["preconditions"]}
    decision = decide(*args, **kwargs)
    event("launches" if decision.launches else "launches nothing")
    assert decision == ref_decide(*args, **kwargs)
    assert phase_gates(case["manifest"], case["jobs"]) == ref_phase_gates(case["manifest"],
                                                                          case["jobs"])
    assert gpu_holders(case["jobs"]) == ref_holders(case["jobs"])


def test_a_decision_with_no_free_gpu_looks_at_no_job() -> None:
    """No GPU below the threshold and no dependency to judge: the jobs are never read."""

    class Untouchable(list[JobState]):
        def __iter__(self) -> Any:
            raise AssertionError("jobs were scanned")

    specs = tuple(JobSpec(id=f"j{i}", phase="main", cmd="run") for i in range(3))
    manifest = Manifest(project="p", source="m", jobs=specs)
    busy = HostView(name="a", usable=True, gpus=(GpuView(0, 9000), GpuView(1, None)),
                    allowed=None, max_parallel=8)
    jobs = Untouchable(JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in specs)
    decision = decide(manifest, jobs, [busy], now=0.0, paused=False, preconditions={})
    assert decision == Decision()
    assert decide(manifest, jobs, [busy], now=0.0, paused=True, preconditions={}) == Decision()
