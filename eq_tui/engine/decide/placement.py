"""Where a job may go: what the scheduler sees of a host, a launch decision, and the choice of
GPUs for a job that takes them alone (one job per GPU)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from eq_tui.api.model import ACTIVE, FailureClass, JobState
from eq_tui.manifest.model import JobSpec

NEVER_SAME_GPU = frozenset({FailureClass.STALLED, FailureClass.GPU_FAULT})


@dataclass(frozen=True)
class Hold:
    """What an active job of ours holds on each of its GPUs. mib None: its GPUs alone."""

    mib: int | None
    now: dict[int, int]  # GPU -> MiB its processes use now (measured)


@dataclass(frozen=True)
class Need:
    """What a waiting job asks for: `mib` per GPU on a shared GPU, or GPUs alone (mib None);
    `cpu`: no GPU at all."""

    mib: int | None = None
    cpu: bool = False


ALONE = Need()
CPU = Need(cpu=True)


@dataclass(frozen=True)
class GpuView:
    index: int
    memory_used_mib: int | None
    memory_total_mib: int | None = None
    # what processes that are not our running jobs' hold, from the same probe as the reading
    # (None: not known, e.g. no probe of the host yet)
    others_mib: int | None = None


@dataclass(frozen=True)
class HostView:
    """What the scheduler may know about a host this tick."""

    name: str
    usable: bool  # reachable, probed this tick, not stopped (disk full, key refused)
    gpus: tuple[GpuView, ...]
    allowed: frozenset[int] | None  # None: every GPU it reports
    max_parallel: int
    # max_parallel was set: it caps jobs placed by memory too (else memory and
    # max_jobs_per_gpu do; one job per GPU always keeps to max_parallel)
    max_parallel_given: bool = True
    quarantined: frozenset[int] = frozenset()
    max_jobs_per_gpu: int | None = None  # jobs sharing one GPU at most (None: memory decides)
    max_cpu_jobs: int = 0  # CPU-only jobs at once
    notes: tuple[str, ...] = ()  # the lab's rules that keep GPUs from us now (lab_rules.py)


@dataclass(frozen=True)
class Launch:
    job_id: str
    host: str
    gpus: tuple[int, ...]  # none for a CPU-only job
    mem_mib: int | None = None  # placed by memory, holding this much per GPU; None: alone


def place_alone(job: JobState, count: int, hosts: Sequence[HostView], free: Mapping[str, list[int]],
           slots: Mapping[str, int]) -> tuple[str, tuple[int, ...]] | None:
    """Pick GPUs the job did not just fail on when possible, then the host with the most free
    GPUs (spreading load), then manifest order."""
    avoid: set[tuple[str, int]] = set()
    last = job.current
    if last is not None:
        avoid = {(last.host, gpu) for gpu in last.gpus}
    # a job that hung or hit a GPU fault there never goes back to the same GPU
    never_again = last is not None and last.failure_class in NEVER_SAME_GPU
    best: tuple[tuple[int, int, int], str, tuple[int, ...]] | None = None
    for order, host in enumerate(hosts):
        candidates = free.get(host.name, [])
        if slots.get(host.name, 0) <= 0 or len(candidates) < count:
            continue
        fresh = [g for g in candidates if (host.name, g) not in avoid]
        if never_again and len(fresh) < count:
            continue
        chosen = tuple(fresh[:count]) if len(fresh) >= count else tuple(candidates[:count])
        reused = any((host.name, g) in avoid for g in chosen)
        rank = (1 if reused else 0, -len(candidates), order)
        if best is None or rank < best[0]:
            best = (rank, host.name, chosen)
    if best is None:
        return None
    return best[1], best[2]


def gpu_holders(jobs: Sequence[JobState]) -> dict[tuple[str, int], str]:
    """(host, gpu) -> job id, for every job of ours that still holds a GPU."""
    held: dict[tuple[str, int], str] = {}
    for job in jobs:
        if job.status not in ACTIVE:
            continue
        placed = job.placed  # once: `host` and `gpus` would each look it up
        if placed is not None:
            for gpu in placed.gpus:
                held[(placed.host, gpu)] = job.id
    return held


def free_gpus(host: HostView, held: Mapping[tuple[str, int], str], threshold_mib: int) -> list[int]:
    """GPUs of `host` that are allowed, below the memory threshold, and held by no job of ours."""
    return [index for index in quiet_gpus(host, threshold_mib) if (host.name, index) not in held]


def quiet_gpus(host: HostView, threshold_mib: int) -> list[int]:
    """GPUs of `host` we may use whose memory reads below the threshold (held or not)."""
    if not host.usable:
        return []
    quiet = []
    for gpu in host.gpus:
        if host.allowed is not None and gpu.index not in host.allowed:
            continue
        if gpu.index in host.quarantined:
            continue
        if gpu.memory_used_mib is None or gpu.memory_used_mib >= threshold_mib:
            continue
        quiet.append(gpu.index)
    return quiet


def no_room(hosts: Sequence[HostView], open_gpus: Mapping[str, Sequence[int]],
            slots: Mapping[str, int]) -> str:
    """Why no job can be placed now: every GPU we may use busy, or the hosts with a free GPU at
    their max_parallel. `open_gpus`: per host, the GPUs that could still take a job. The lab's
    rules that keep GPUs from us follow."""
    usable = [h for h in hosts if h.usable]
    rules = "; ".join(note for h in usable for note in h.notes)
    reason = _no_room(usable, open_gpus, slots)
    return f"{reason}; {rules}" if rules else reason


def _no_room(usable: Sequence[HostView], open_gpus: Mapping[str, Sequence[int]],
             slots: Mapping[str, int]) -> str:
    if not usable:
        return "no host can take a job now (unreachable or stopped)"
    ours = sum(1 for h in usable for gpu in h.gpus
               if (h.allowed is None or gpu.index in h.allowed) and gpu.index not in h.quarantined)
    limited = [h for h in usable if open_gpus.get(h.name) and slots.get(h.name, 0) <= 0]
    if limited and len(limited) == sum(1 for h in usable if open_gpus.get(h.name)):
        if len(limited) == 1:
            return f"host limit max_parallel {limited[0].max_parallel} reached"
        named = ", ".join(f"{h.name} {h.max_parallel}" for h in limited)
        return f"host limits max_parallel reached ({named})"
    quarantined = sum(len(h.quarantined) for h in usable)
    if ours == 0:
        return "no GPU we may use" + (f" ({quarantined} quarantined)" if quarantined else "")
    extra = f"; {quarantined} quarantined" if quarantined else ""
    return f"no free GPU ({ours} of {ours} busy{extra})"


class Placer(Protocol):
    def order(self, queue: list[JobState]) -> list[JobState]:
        """The waiting jobs (by priority, then queue order) in the order to place them."""
        ...

    def capacity(self) -> int:
        """About how many more jobs could launch now (0: none)."""
        ...

    def place(self, job: JobState, spec: JobSpec) -> Launch | str:
        """Where `job` goes (and the room it takes is taken), or why it waits."""
        ...

    def full(self) -> str:
        """Why no more job can be placed (when capacity() is 0)."""
        ...


class OnePerGpu:
    """Every job takes its GPUs alone: a GPU is free when its memory reads below the threshold
    and no job of ours holds it."""

    def __init__(self, hosts: Sequence[HostView], quiet: Mapping[str, list[int]],
                 active: Sequence[JobState]) -> None:
        held = gpu_holders(active)
        per_host = Counter(placed.host for job in active if (placed := job.placed) is not None)
        self.hosts = hosts
        self.free = {h.name: [g for g in quiet[h.name] if (h.name, g) not in held] for h in hosts}
        self.slots = {h.name: max(0, h.max_parallel - per_host.get(h.name, 0)) for h in hosts}

    def order(self, queue: list[JobState]) -> list[JobState]:
        return queue

    def capacity(self) -> int:
        return sum(min(len(self.free[h.name]), self.slots[h.name]) for h in self.hosts)

    def full(self) -> str:
        return no_room(self.hosts, self.free, self.slots)

    def place(self, job: JobState, spec: JobSpec) -> Launch | str:
        count = spec.gpus_per_job
        placed = place_alone(job, count, self.hosts, self.free, self.slots)
        if placed is None:
            return f"waiting for {count} free GPU(s) on one host"
        host, gpus = placed
        for gpu in gpus:
            self.free[host].remove(gpu)
        self.slots[host] -= 1
        return Launch(job.id, host, gpus)
