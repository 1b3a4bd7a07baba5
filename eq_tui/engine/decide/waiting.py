"""Why a waiting job was not launched this tick. Pure.

decide() names the reason of every job it looked at; the jobs it did not reach (it looks only a
few times as far down the queue as can launch) are explained here, one job at a time, from
what the tick knew: the queue paused, a retry time, a phase waiting for another or held by the
crash guard, a bigger job placed first (packing order), the GPUs or hosts all taken. So
explaining a queue of 10,000 costs the caller one cheap pass, and decide() no scan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.manifest.model import JobSpec, PhaseSpec

PAUSED = "the queue is paused"
STRICT_WAVE = "waves: strict; waits for the running wave to end"


@dataclass
class WaitContext:
    """What decide() knew this tick, filled in as it goes."""

    now: float
    specs: Mapping[str, JobSpec] = field(default_factory=dict)
    queue: str = "waiting for a free GPU"  # why the GPU jobs decide() did not reach wait
    cpu_queue: str | None = None  # the same for CPU-only jobs, when they queue apart
    overall: str | None = None  # holds every waiting job (paused, strict waves)
    phases: dict[str, str] = field(default_factory=dict)  # phase -> why its jobs wait
    overtaken: dict[str, str] = field(default_factory=dict)  # job -> why (packing order)
    launched: frozenset[str] = frozenset()

    def rest(self, reason: str, *, cpu: bool) -> None:
        """Why the jobs of a queue that placement did not reach wait."""
        if cpu:
            self.cpu_queue = reason
        else:
            self.queue = reason

    def why(self, job: JobState) -> str:
        """Why `job`, waiting and not named by decide(), was not launched."""
        if self.overall:
            return self.overall
        if job.retry_at is not None and job.retry_at > self.now:
            return retry_reason(job, self.now)
        if job.status == JobStatus.FAILED_OOM and job.retry_at is None:
            return "waits for its retry after a CUDA OOM"
        spec = self.specs.get(job.id)
        if spec is None:
            return "no longer defined (not in the manifest)"
        phase = self.phases.get(job.phase)
        if phase:
            return phase
        overtaken = self.overtaken.get(job.id)
        if overtaken:
            return overtaken
        if self.cpu_queue is not None and spec.gpus_per_job == 0:
            return self.cpu_queue
        return self.queue


def retry_reason(job: JobState, now: float) -> str:
    """When its delayed retry is due, as a clock time: a countdown would change the job's
    record every tick (the retry pane counts down from `retry_at`)."""
    assert job.retry_at is not None
    due = time.strftime("%H:%M:%S", time.localtime(job.retry_at))
    current = job.current
    cls = current.failure_class if current is not None else None
    if job.status == JobStatus.FAILED_OOM or cls == FailureClass.CUDA_OOM:
        return f"retry at {due} (OOM)"
    return f"retry at {due} ({cls})" if cls else f"retry at {due}"


def phase_waits(phases: Sequence[PhaseSpec], unfinished: Mapping[str, bool]) -> dict[str, str]:
    """For each phase some of whose dependencies have not finished: which ones it waits for."""
    waits = {}
    for phase in phases:
        open_deps = [dep for dep in phase.depends_on if unfinished.get(dep)]
        if open_deps:
            label = "phase" if len(open_deps) == 1 else "phases"
            waits[phase.name] = f"waits for {label} {', '.join(open_deps)}"
    return waits


def overtaken_by(queue: list[JobState], looked_at: list[JobState], ahead: str) -> dict[str, str]:
    """Jobs ahead in `queue` (priority, then queue order) of some job looked at in placement
    order, yet not looked at themselves: `ahead` (a bigger job) went first. Walks the queue
    only as far as the last job looked at."""
    seen = {job.id for job in looked_at}
    behind: dict[str, str] = {}
    left = len(seen)
    for job in queue:
        if left == 0:
            break
        if job.id in seen:
            left -= 1
        else:
            behind[job.id] = f"behind a bigger job (packing order): {ahead}"
    return behind
