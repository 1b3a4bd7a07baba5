"""`--dry-run` over a run dir that already has state: every job with its current status, only
the waiting ones planned onto GPUs (running jobs keep theirs), and what the manifest edit would
add, change or retire. Reads the state; writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.decide.scheduler import GpuView, HostView, PhaseLimit, decide
from eq_tui.manifest.model import Manifest

HELD_MIB = 1 << 30  # a GPU a running job holds reads as full
CHANGED_SINCE = "command changed since it completed"


@dataclass(frozen=True)
class PlannedJob:
    id: str
    phase: str
    cmd: str
    status: str  # now, or `stuck → pending` when the edit retries it
    where: str  # running there, or the first GPU it would get, or ""
    note: str = ""  # new | command changed ... | retired ...


def _views(manifest: Manifest, held: set[tuple[str, int]]) -> list[HostView]:
    views = []
    for spec in manifest.hosts:
        count = spec.simulate.gpus if spec.simulate else 8
        indexes = spec.gpus if spec.gpus is not None else tuple(range(count))
        gpus = tuple(GpuView(i, HELD_MIB if (spec.name, i) in held else 0) for i in indexes)
        views.append(HostView(name=spec.name, usable=True, gpus=gpus, allowed=None,
                              max_parallel=spec.max_parallel))
    return views


def _merge(manifest: Manifest, saved: dict[str, Any]) -> tuple[
        list[tuple[JobState, str, str]], list[PlannedJob]]:
    """(job as the engine would have it after reconciling, status shown, note) per manifest
    job, and the retired ones."""
    before = {str(raw.get("id")): JobState.from_json(raw) for raw in saved.get("jobs") or []}
    merged = []
    for spec in manifest.jobs:
        job = before.pop(spec.id, None)
        if job is None:
            merged.append((JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd), "pending",
                           "new"))
            continue
        shown, note = str(job.status), ""
        if job.cmd != spec.cmd and job.edits:  # as the ledger's reconcile keeps it
            note = "its edit stays (the manifest has another command)"
        elif job.cmd != spec.cmd and job.status == JobStatus.COMPLETED:
            note = (f"{CHANGED_SINCE}: its result is of `{job.cmd}`; --rerun-changed runs it "
                    "again")
            job = replace(job, cmd=spec.cmd)  # the plan shows the manifest's command
        elif job.cmd != spec.cmd:
            job = replace(job, cmd=spec.cmd)  # the plan's copy, not the run's
            if job.status.needs_person:
                shown, note = f"{job.status} → pending", "command changed: retried by itself"
                job = replace(job, status=JobStatus.PENDING)  # the plan's copy, not the run's
            else:
                note = "command changed: the next attempt uses it"
        elif job.status == JobStatus.STUCK:
            note = "retry: r in the UI, or --retry-stuck"
        merged.append((replace(job, phase=spec.phase), shown, note))
    retired = [PlannedJob(job.id, job.phase, job.cmd, str(job.status), _running(job),
                          "retired: no longer in the manifest" + (
                              "; keeps running, watched until it ends"
                              if job.status.is_active else ""))
               for job in before.values()]
    return merged, retired


def placement(host: str, gpus: Sequence[int]) -> str:
    """`box:0,1`, or `box:cpu` for a job that takes no GPU."""
    return f"{host}:{','.join(map(str, gpus)) or 'cpu'}"


def _running(job: JobState) -> str:
    if not job.status.is_active or job.host is None:
        return ""
    return placement(job.host, job.gpus)


def existing_plan(manifest: Manifest, saved: dict[str, Any]) -> list[PlannedJob]:
    merged, retired = _merge(manifest, saved)
    jobs = [job for job, _shown, _note in merged]
    held = {(job.host, gpu) for job in jobs if job.status.is_active and job.host
            for gpu in job.gpus}
    crash = (saved.get("crash_guard") or {}).get("held") or {}
    limits = {str(phase): PhaseLimit(0, str(why)) for phase, why in crash.items()}
    paused = bool(saved.get("paused"))
    decision = decide(manifest, jobs, _views(manifest, held), now=float("inf"), paused=paused,
                      preconditions={job.id: True for job in jobs}, limits=limits)
    placed = {x.job_id: placement(x.host, x.gpus) for x in decision.launches}
    plan = []
    for job, shown, note in merged:
        where = _running(job) or placed.get(job.id, "")
        if not where and job.status.is_waiting:
            where = "launching paused" if paused else "next free GPU"
        if job.phase in crash and job.status.is_waiting:
            note = note or "phase held by the crash guard"
        plan.append(PlannedJob(job.id, job.phase, job.cmd, shown, where, note))
    return plan + retired
