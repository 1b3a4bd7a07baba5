"""What each running job holds on its GPUs, and what a waiting job needs: GPU sharing by memory.

Each probe's compute processes (`nvidia-smi --query-compute-apps`) are matched to our attempts
by process group or session (an attempt's processes share the group its wrapper leads), so a
job's usage counts its whole process tree and never someone else's process. An attempt's peak
per GPU is kept in its record. A running shared job holds max(its estimate, what it uses now)
until its usage has levelled off (no new peak for a while: `levelled`), then what it has shown:
a job that has not touched CUDA yet still holds its full estimate, so two jobs never race for
the same memory at start-up.

`mem_mib: auto` learns from the job's family (the same template, or phase): the largest peak
seen x HEADROOM + HEADROOM_MIB. Until one of the family has been measured, they run one to a
GPU, alone; once one has levelled off (or ended), the family packs, and the GPUs of those
running alone are shared too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.placement import ALONE, CPU, Hold, Need
from eq_tui.engine.tick.cost import CostBook
from eq_tui.hosts.base import HostSnapshot
from eq_tui.manifest.model import JobSpec

# A job's usage has levelled off when it has shown no new peak for a while: LEVEL_AFTER_S once
# it reached NEAR_ESTIMATE of what it was placed for; LEVEL_UNKNOWN_S when it had no estimate
# (alone: the first of an `auto` family); LEVEL_LOW_S while far below its estimate (a job still
# loading its data holds what it said it needs, not the little it has touched so far).
LEVEL_AFTER_S = 10.0
LEVEL_UNKNOWN_S = 20.0
LEVEL_LOW_S = 120.0
NEAR_ESTIMATE = 0.75
GROWTH_MIB = 128  # a peak that grows by less is not news (nor worth a write)
HEADROOM = 1.15
HEADROOM_MIB = 1024
ESCALATION = 1.5  # a job that hit a CUDA OOM on a shared GPU asks for this much more


@dataclass
class Usage:
    attempt: int
    now: dict[int, int] = field(default_factory=dict)
    peak: int = 0
    grew_at: float = 0.0  # when it last grew by GROWTH_MIB or more
    mark: int = 0  # its peak then


def usage_by_group(snap: HostSnapshot) -> dict[int, dict[int, int]]:
    """Process group or session -> GPU -> MiB its processes use: an attempt's wrapper leads
    both, so its processes are found under its group id whether a worker kept the group or
    only the session."""
    index = {gpu.uuid: gpu.index for gpu in snap.gpus}
    groups: dict[int, dict[int, int]] = {}
    for process in snap.processes:
        gpu = index.get(process.gpu_uuid)
        if gpu is None or process.used_mib is None:
            continue
        for group in (process.pgid, process.sid if process.sid != process.pgid else None):
            if group is not None:
                on = groups.setdefault(group, {})
                on[gpu] = on.get(gpu, 0) + process.used_mib
    return groups


def others_by_gpu(snap: HostSnapshot, ours: Mapping[int, int]) -> dict[int, int]:
    """GPU -> what is not our running jobs': the processes not ours, plus what no process
    accounts for (the driver's, a container's we cannot see). The GPU's reading and its process
    list are two queries a moment apart, so the reading less ours could miss someone else's
    memory when one of our jobs allocated in between; counted this way it never does."""
    index = {gpu.uuid: gpu.index for gpu in snap.gpus}
    listed: dict[int, int] = {}
    for process in snap.processes:
        at = index.get(process.gpu_uuid)
        if at is not None and process.used_mib is not None:
            listed[at] = listed.get(at, 0) + process.used_mib
    others = {}
    for reading in snap.gpus:
        if reading.memory_used_mib is None:
            continue
        theirs = listed.get(reading.index, 0) - ours.get(reading.index, 0)
        unaccounted = max(0, reading.memory_used_mib - listed.get(reading.index, 0))
        others[reading.index] = max(0, theirs) + unaccounted
    return others


def levelled(usage: Usage | None, estimate: int | None, now: float) -> bool:
    if usage is None or usage.peak <= 0:
        return False
    if estimate is None:
        wait = LEVEL_UNKNOWN_S
    elif usage.peak >= NEAR_ESTIMATE * estimate:
        wait = LEVEL_AFTER_S
    else:
        wait = LEVEL_LOW_S
    return now - usage.grew_at >= wait


def learned_estimate(peak_mib: int) -> int:
    return math.ceil(peak_mib * HEADROOM + HEADROOM_MIB)


def uses_memory_placement(specs: Iterable[JobSpec]) -> bool:
    """Whether any job is placed by memory (or takes no GPU): else one job per GPU, as ever."""
    return any(spec.mem_mib is not None or spec.gpus_per_job == 0 for spec in specs)


def any_without_gpu(specs: Iterable[JobSpec]) -> bool:
    """Whether some job takes no GPU (MemoryPlan.cpu_jobs: the queue has a CPU part)."""
    return any(spec.gpus_per_job == 0 for spec in specs)


class MemoryBook:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.usage: dict[str, Usage] = {}
        self.family_peak: dict[str, int] = {}
        # host -> GPU -> what processes that are not our running jobs' hold, by the last probe
        self.others: dict[str, dict[int, int]] = {}
        self._families_read = False
        self._uses_key = -1
        self._uses = False
        self._cpu_jobs = False
        self.cost = CostBook(ctx)  # what each attempt cost, metered from the same probes

    # ---- measuring -------------------------------------------------------------------------

    def observe(self, probed: Iterable[str]) -> None:
        """Take this tick's probes in: each active attempt's usage now and its peak, and what
        each attempt cost since the last probe."""
        ctx = self.ctx
        now = ctx.clock()
        self._read_families()
        attempts = ctx.ledger.attempts_by_host()
        for name in probed:
            record = ctx.hosts.get(name)
            snap = record.snapshot if record is not None else None
            if snap is None or not snap.ok:
                continue
            groups = usage_by_group(snap)
            ours: dict[int, int] = {}
            for ref in attempts.get(name, []):
                job = ctx.ledger.jobs.get(ref.key)
                if job is not None:
                    for gpu, mib in self._measure(job, snap, groups, now).items():
                        ours[gpu] = ours.get(gpu, 0) + mib
            self.others[name] = others_by_gpu(snap, ours)
        for job_id in [j for j in self.usage if j not in ctx.ledger.jobs
                       or not ctx.ledger.jobs[j].status.is_active]:
            self._settle(job_id)
        self.cost.observe(probed)

    def _measure(self, job: JobState, snap: HostSnapshot,
                 groups: Mapping[int, dict[int, int]], now: float) -> dict[int, int]:
        """What the attempt's processes use on each GPU, by this probe."""
        current = job.current
        probe = snap.attempts.get(job.id)
        if current is None or probe is None or probe.pgid is None:
            return {}
        usage = self.usage.get(job.id)
        if usage is None or usage.attempt != current.n:
            usage = self.usage[job.id] = Usage(current.n, peak=current.peak_mib or 0,
                                                grew_at=now)
        used = dict(groups.get(probe.pgid, {}))
        usage.now = used
        top = max(used.values(), default=0)
        if top > usage.peak:
            if top >= usage.mark + GROWTH_MIB or usage.mark == 0:
                usage.grew_at, usage.mark = now, top  # still growing: not levelled off
            usage.peak = top
            if top - (current.peak_mib or 0) >= GROWTH_MIB or current.peak_mib is None:
                self.ctx.ledger.update_attempt(current, peak_mib=top)
                self.ctx.ledger.changed(job)
        if levelled(usage, current.estimate_mib, now):
            self._learn(job, usage.peak)
        return used

    def _settle(self, job_id: str) -> None:
        """An attempt ended: its peak, whole, is what its family learns from."""
        usage = self.usage.pop(job_id)
        job = self.ctx.ledger.jobs.get(job_id)
        if job is None:
            return
        attempt = next((a for a in job.history if a.n == usage.attempt), None)
        if attempt is not None and usage.peak > (attempt.peak_mib or 0):
            self.ctx.ledger.update_attempt(attempt, peak_mib=usage.peak)
            self.ctx.ledger.changed(job)
        if usage.peak:
            self._learn(job, usage.peak)

    def _learn(self, job: JobState, peak: int) -> None:
        spec = self.ctx.ledger.specs.get(job.id)
        if spec is None or spec.mem_mib != "auto" or peak <= 0:
            return
        if peak > self.family_peak.get(spec.family, 0):
            self.family_peak[spec.family] = peak

    def _read_families(self) -> None:
        """Once, after a restart: the peaks the run's finished attempts recorded."""
        if self._families_read:
            return
        self._families_read = True
        for job in self.ctx.ledger.jobs.values():
            for attempt in job.history:
                finished = attempt.end is not None or not job.status.is_active \
                    or attempt is not job.current
                if attempt.peak_mib and finished:
                    self._learn(job, attempt.peak_mib)

    def plan(self) -> MemoryPlan | None:
        """What placement needs to know, when some job is placed by memory (or takes no GPU);
        None when every job takes its GPUs alone, as without these keys (the scheduler's fast
        path)."""
        ledger = self.ctx.ledger
        if self._uses_key != ledger.specs_version:
            self._uses_key = ledger.specs_version
            self._uses = uses_memory_placement(ledger.specs.values())
            self._cpu_jobs = any_without_gpu(ledger.specs.values())
        if not self._uses:
            return None
        return MemoryPlan(ledger.specs, self.usage, self.family_peak, self.ctx.clock(),
                          cpu_jobs=self._cpu_jobs)


@dataclass(frozen=True)
class MemoryPlan:
    """This tick's memory picture, for placement: every job's spec, what running attempts use
    (Usage), and each family's largest measured peak."""

    specs: Mapping[str, JobSpec]
    usage: Mapping[str, Usage]
    family_peak: Mapping[str, int]
    now: float
    cpu_jobs: bool = True  # some job takes no GPU (False: no waiting job need be looked at for it)

    def levelled(self, job: JobState) -> bool:
        current = job.current
        estimate = current.estimate_mib if current is not None else None
        return levelled(self.usage.get(job.id), estimate, self.now)

    def hold(self, job: JobState) -> Hold:
        """What an active job holds per GPU now."""
        current = job.current
        usage = self.usage.get(job.id)
        now = dict(usage.now) if usage is not None else {}
        if current is None or not job.gpus:
            return Hold(None, now)
        shown = max([usage.peak if usage else 0, *now.values()])
        settled = self.levelled(job)
        if current.shared and current.estimate_mib is not None:
            return Hold(shown if settled else max(current.estimate_mib, shown), now)
        spec = self.specs.get(job.id)
        if (spec is not None and spec.mem_mib == "auto" and not spec.exclusive and settled
                and job.mem_escalation < 2):
            return Hold(shown, now)  # the family's first, measured: its GPU is shared now
        return Hold(None, now)

    def need(self, job: JobState, spec: JobSpec) -> Need:
        """What a waiting job asks for."""
        if spec.gpus_per_job == 0:
            return CPU
        if spec.mem_mib is None or spec.exclusive or job.mem_escalation >= 2:
            return ALONE
        if spec.mem_mib == "auto":
            own = max((a.peak_mib or 0 for a in job.history), default=0)
            known = max(own, self.family_peak.get(spec.family, 0))
            if not known:
                return ALONE  # until one of its family has shown what it needs
            base = learned_estimate(known)
        else:
            base = spec.mem_mib
        if job.mem_escalation >= 1:
            base = math.ceil(base * ESCALATION)
        return Need(mib=base)
