"""What an active job's probe says about it, and what status that leads to. Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace

from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.engine.decide.oversize import GpuTotals, Oversize, oversize
from eq_tui.engine.tick.classify import classify_failure
from eq_tui.hosts.base import AttemptProbe
from eq_tui.manifest.model import Manifest

LAUNCH_GRACE_S = 45.0  # a `launching` attempt with no trace after this long never started


@dataclass(frozen=True)
class Running:
    """Still running (or its session is still draining within the grace period)."""

    exited_seen_at: float | None = None


@dataclass(frozen=True)
class Exited:
    exit_code: int
    log_tail: str
    output_ok: bool | None
    stale: bool = False  # the session outlived the process and must be killed first


@dataclass(frozen=True)
class Lost:
    """The session vanished with no exit record and the process is gone."""


@dataclass(frozen=True)
class NeverStarted:
    """A `launching` record whose session never came up (the engine died mid-launch)."""


Observation = Running | Exited | Lost | NeverStarted


def observe(job: JobState, probe: AttemptProbe | None, *, now: float,
            stale_grace_s: float) -> Observation:
    if probe is None:
        return Running(job.exited_seen_at)
    if probe.exit_code is not None:
        if not probe.session_alive:
            return Exited(probe.exit_code, probe.log_tail, probe.output_ok)
        seen = job.exited_seen_at if job.exited_seen_at is not None else now
        if now - seen >= stale_grace_s:
            return Exited(probe.exit_code, probe.log_tail, probe.output_ok, stale=True)
        return Running(seen)
    if probe.session_alive or probe.pid_alive:
        return Running(None)
    if job.status == JobStatus.LAUNCHING and probe.pid is None:
        return NeverStarted()
    return Lost()


@dataclass(frozen=True)
class Verdict:
    status: JobStatus
    failure_class: str | None = None
    detail: str = ""
    retry_at: float | None = None
    quarantine_gpus: bool = False  # a GPU fault: counts toward quarantining its GPUs
    stop_host: bool = False  # disk full: launch nothing more there
    escalate_memory: bool = False  # a CUDA OOM on a shared GPU: ask for more next time
    min_gpu_mib: int | None = None  # asked more than its card: only GPUs larger than this next


def _retry_or_stuck(job: JobState, manifest: Manifest, cls: FailureClass, detail: str,
                    status: JobStatus, retry_at: float | None, *, once: bool = False,
                    quarantine: bool = False) -> Verdict:
    used = job.retries_by_class.get(str(cls), 0)
    limit = job.retry_base + manifest.oom_retry.max_attempts
    if job.attempts >= limit or (once and used >= 1):
        return Verdict(JobStatus.STUCK, str(cls),
                       f"{detail} (attempt {job.attempts}/{job.attempts if once else limit}, "
                       "no retries left)", quarantine_gpus=quarantine)
    return Verdict(status, str(cls), detail, retry_at=retry_at, quarantine_gpus=quarantine)


def _too_big(job: JobState, manifest: Manifest, big: Oversize, now: float) -> Verdict:
    """An OOM asking more than its card holds is never retried on a card that size: on a
    larger GPU at once, or stuck when the run has none."""
    if not big.fits_somewhere:
        return Verdict(JobStatus.STUCK, str(FailureClass.CUDA_OOM), big.detail)
    verdict = _retry_or_stuck(job, manifest, FailureClass.CUDA_OOM, big.retry_detail,
                              JobStatus.FAILED_OOM, now)
    if verdict.status == JobStatus.STUCK:
        return verdict
    return replace(verdict, min_gpu_mib=big.floor_mib)


def verdict_for_exit(job: JobState, exited: Exited, manifest: Manifest, *, now: float,
                     has_output_check: bool, output_where: str = "",
                     gpu_totals: GpuTotals | None = None) -> Verdict:
    """`output_where`: the output_check glob as it was looked for, and where (for the detail
    of output_missing). `gpu_totals`: what the run knows of its GPUs' sizes (None: nothing)."""
    if exited.exit_code == 0:
        if not has_output_check or exited.output_ok:
            return Verdict(JobStatus.COMPLETED)
        where = f" {output_where}" if output_where else ""
        return Verdict(JobStatus.STUCK, str(FailureClass.OUTPUT_MISSING),
                       f"exit 0 but output_check{where} matched nothing")
    found = classify_failure(exited.exit_code, exited.log_tail)
    detail = found.detail
    if exited.stale:
        detail = f"{detail} (stale session cleaned)"
    match found.cls:
        case FailureClass.CUDA_OOM:
            current = job.current
            big = None if current is None or gpu_totals is None else oversize(
                exited.log_tail, current.host, current.gpus, gpu_totals)
            if big is not None:
                return _too_big(job, manifest, big, now)
            if current is not None and current.shared and job.mem_escalation < 2:
                # crowding, not the job, is the likely cause: after the delay it goes wherever
                # more memory fits beside what the others there showed; then it waits for its
                # GPU alone at once (placement keeps new jobs off it from this tick on)
                more = "1.5x its estimate" if job.mem_escalation == 0 else "its GPU alone"
                delay = manifest.oom_retry.delay if job.mem_escalation == 0 else 0.0
                verdict = _retry_or_stuck(job, manifest, found.cls,
                                          f"{detail} (on a shared GPU: next attempt gets {more})",
                                          JobStatus.FAILED_OOM, now + delay)
                return replace(verdict, escalate_memory=verdict.status != JobStatus.STUCK)
            return _retry_or_stuck(job, manifest, found.cls, detail, JobStatus.FAILED_OOM,
                                   now + manifest.oom_retry.delay)
        case FailureClass.NCCL:
            return _retry_or_stuck(job, manifest, found.cls, detail, JobStatus.PENDING, None,
                                   once=True)
        case FailureClass.GPU_FAULT:
            return _retry_or_stuck(job, manifest, found.cls, detail, JobStatus.PENDING, None,
                                   quarantine=True)
        case FailureClass.PORT_IN_USE:
            return _retry_or_stuck(job, manifest, found.cls, detail, JobStatus.PENDING,
                                   now + manifest.retry_delay_s)
        case FailureClass.DISK_FULL:
            return Verdict(JobStatus.STUCK, str(found.cls), detail, stop_host=True)
        case _:
            return Verdict(JobStatus.STUCK, str(found.cls), detail)


def verdict_for_lost(job: JobState, allowed: int = 1) -> Verdict:
    """Requeued while it was lost fewer than `allowed` times (its `retry_lost`)."""
    lost = job.lost_count
    if lost < allowed:
        times = "once" if allowed == 1 else f"{lost + 1} of {allowed} times"
        return Verdict(JobStatus.PENDING, str(FailureClass.LOST),
                       f"session vanished with no exit record; requeued {times}")
    again = " again" if lost else " (retry_lost: 0)"
    return Verdict(JobStatus.STUCK, str(FailureClass.LOST),
                   f"session vanished with no exit record{again}")
