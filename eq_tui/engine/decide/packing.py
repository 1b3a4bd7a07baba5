"""Placement by memory: several jobs to a GPU where their memory fits, CPU-only jobs beside.

A GPU has room for a job when the job's memory fits in what is left: its total, minus what
other people's processes use (what the GPU reads, less what our jobs there use, both from one
probe: a watcher's fresher reading of the total alone would mix two moments), minus what
each of our jobs there holds (memory.py: a job that has not allocated yet holds its whole
estimate), minus `gpu_margin_mib`. Someone else's memory is subtracted, never a reason by
itself to skip a GPU. Best fit: the fullest GPU that still fits, so whole GPUs stay free for
the jobs that need them alone. A job that takes its GPUs alone gets them only where no job of
ours is and the memory reads below the free threshold, as when nothing shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from eq_tui.api.model import JobState
from eq_tui.engine.decide.placement import (
    NEVER_SAME_GPU,
    Hold,
    HostView,
    Launch,
    Need,
    no_room,
    place_alone,
)
from eq_tui.manifest.model import JobSpec, Manifest

ROOM_UNIT_MIB = 4096
MAX_SHARED_GUESS = 8
WHOLE_GPU_MIB = 1 << 30  # a job that takes its GPUs alone is placed before any shared one
NO_CAP = 1 << 30  # job slots of a host whose max_parallel was not set: memory decides


class MemoryNeeds(Protocol):
    """What the packer asks of this tick's memory picture (tick/memory.py's MemoryPlan)."""

    @property
    def cpu_jobs(self) -> bool:
        """Whether some job takes no GPU (its own queue); False spares a pass over the queue."""
        ...

    def hold(self, job: JobState) -> Hold: ...

    def need(self, job: JobState, spec: JobSpec) -> Need: ...


@dataclass
class Room:
    """One GPU as placement sees it this tick."""

    index: int
    total: int | None
    used: int | None  # the latest reading (for a job that wants the GPU alone)
    others: int | None  # what processes not of our jobs hold (one probe's reading)
    holds: int = 0  # what our jobs that share it hold
    jobs: int = 0  # our jobs on it
    alone: bool = False  # a job of ours has it alone
    reserved: bool = False  # a job waits for it alone: nothing new is packed onto it

    def free_alone(self, threshold_mib: int) -> bool:
        """No job of ours on it and its memory below the free threshold: a job may have it
        alone, as when nothing shares."""
        return self.jobs == 0 and self.used is not None and self.used < threshold_mib

    def left(self, margin: int) -> int | None:
        if self.total is None or self.others is None:
            return None
        return self.total - self.others - self.holds - margin


def _gib(mib: int) -> str:
    return f"{mib / 1024:.1f}"


class MemoryPlacer:
    def __init__(self, manifest: Manifest, hosts: Sequence[HostView], active: Sequence[JobState],
                 plan: MemoryNeeds, specs: Mapping[str, JobSpec]) -> None:
        self.plan = plan
        self.margin = manifest.gpu_margin_mib
        self.threshold = manifest.gpu_free_threshold_mib
        self.hosts = [h for h in hosts if h.usable]
        self.rooms: dict[str, dict[int, Room]] = {}
        for host in self.hosts:
            self.rooms[host.name] = {
                gpu.index: Room(gpu.index, gpu.memory_total_mib, gpu.memory_used_mib,
                                gpu.others_mib)
                for gpu in host.gpus
                if (host.allowed is None or gpu.index in host.allowed)
                and gpu.index not in host.quarantined}
        gpu_jobs: dict[str, int] = {}
        cpu_jobs: dict[str, int] = {}
        for job in active:
            placed = job.placed  # once: `host` and `gpus` would each look it up
            if placed is None:
                continue
            host_name, gpus = placed.host, placed.gpus
            spec = specs.get(job.id)
            if not gpus and spec is not None and spec.gpus_per_job == 0:
                cpu_jobs[host_name] = cpu_jobs.get(host_name, 0) + 1
                continue
            gpu_jobs[host_name] = gpu_jobs.get(host_name, 0) + 1
            hold = plan.hold(job)
            rooms = self.rooms.get(host_name, {})
            for gpu in gpus:
                room = rooms.get(gpu)
                if room is None:
                    continue
                room.jobs += 1
                if hold.mib is None:
                    room.alone = True
                else:
                    room.holds += hold.mib
        self.slots = {h.name: max(0, (h.max_parallel if h.max_parallel_given else NO_CAP)
                                  - gpu_jobs.get(h.name, 0)) for h in self.hosts}
        self.cpu_left = {h.name: max(0, h.max_cpu_jobs - cpu_jobs.get(h.name, 0))
                         for h in self.hosts}
        self.cap = {h.name: h.max_jobs_per_gpu for h in self.hosts}
        self.specs = specs
        self.gpu_seat = _GpuSeat(self)
        self.cpu_seat = _CpuSeat(self)

    # ---- GPU jobs --------------------------------------------------------------------------

    def free_alone(self, host: str) -> list[int]:
        return [room.index for room in self.rooms[host].values()
                if room.free_alone(self.threshold)]

    def sharable(self, host: str, room: Room) -> bool:
        cap = self.cap[host]
        return not room.alone and not room.reserved and (cap is None or room.jobs < cap)

    def gpu_capacity(self) -> int:
        """About how many jobs could start: a GPU free for a job alone counts one, a shared
        one a job per ROOM_UNIT_MIB it has left (up to its max_jobs_per_gpu, or
        MAX_SHARED_GUESS): enough to look far enough down the queue, not a promise."""
        total = 0
        for host in self.hosts:
            cap = self.cap[host.name]
            seats = 0
            for room in self.rooms[host.name].values():
                left = room.left(self.margin) or 0
                if self.sharable(host.name, room) and left > 0:
                    most = MAX_SHARED_GUESS if cap is None else cap - room.jobs
                    seats += min(most, max(1, left // ROOM_UNIT_MIB))
                elif room.free_alone(self.threshold):
                    seats += 1
            total += min(seats, self.slots[host.name])
        return total

    def gpu_full(self) -> str:
        """Why no GPU job can be placed now: the GPUs that could take one, per host, are those
        with room to share or free for a job alone."""
        open_gpus = {h.name: [room.index for room in self.rooms[h.name].values()
                              if self._open(h.name, room)] for h in self.hosts}
        return no_room(self.hosts, open_gpus, self.slots)

    def _open(self, host: str, room: Room) -> bool:
        return room.free_alone(self.threshold) or (
            self.sharable(host, room) and (room.left(self.margin) or 0) > 0)

    def place_gpu(self, job: JobState, spec: JobSpec) -> Launch | str:
        need = self.plan.need(job, spec)
        if need.mib is None:
            free = {h.name: self.free_alone(h.name) for h in self.hosts}
            placed = place_alone(job, spec.gpus_per_job, self.hosts, free, self.slots)
            if placed is None and job.mem_escalation >= 2:
                return self._reserve(job, spec.gpus_per_job)
            if placed is None:
                return f"waiting for {spec.gpus_per_job} GPU(s) of one host to itself"
            host, gpus = placed
            for gpu in gpus:
                room = self.rooms[host][gpu]
                room.jobs += 1
                room.alone = True
            self.slots[host] -= 1
            return Launch(job.id, host, gpus)
        return self._place_shared(job, spec.gpus_per_job, need.mib)

    def _place_shared(self, job: JobState, count: int, need: int) -> Launch | str:
        last = job.current
        avoid: set[tuple[str, int]] = set()
        never: set[tuple[str, int]] = set()
        if last is not None:
            # a GPU it was crowded out of is taken last, yet taken where the larger estimate
            # fits beside what the others there hold: a single shared card never empties
            avoid = {(last.host, gpu) for gpu in last.gpus}
            if last.failure_class in NEVER_SAME_GPU:
                never = avoid
        best: tuple[tuple[int, int, int], str, tuple[int, ...]] | None = None
        for order, host in enumerate(self.hosts):
            if self.slots[host.name] <= 0:
                continue
            fits: list[tuple[int, int]] = []  # (what is left after it, GPU)
            for room in self.rooms[host.name].values():
                left = room.left(self.margin)
                if (left is None or left < need or not self.sharable(host.name, room)
                        or (host.name, room.index) in never):
                    continue
                fits.append((left - need, room.index))
            if len(fits) < count:
                continue
            fits.sort(key=lambda fit: ((host.name, fit[1]) in avoid, fit[0]))
            chosen = fits[:count]
            reused = sum(1 for _, gpu in chosen if (host.name, gpu) in avoid)
            rank = (reused, sum(spare for spare, _ in chosen), order)
            if best is None or rank < best[0]:
                best = (rank, host.name, tuple(sorted(gpu for _, gpu in chosen)))
        if best is None:
            return self._why_not(count, need)
        _, host_name, gpus = best
        for gpu in gpus:
            room = self.rooms[host_name][gpu]
            room.jobs += 1
            room.holds += need
        self.slots[host_name] -= 1
        return Launch(job.id, host_name, gpus, mem_mib=need)

    def _reserve(self, job: JobState, count: int) -> str:
        """The last attempt after CUDA OOMs on shared GPUs waits for GPUs alone: keep new jobs
        off the ones it waits for (those it ran on, else the least crowded) so they empty."""
        last = job.current
        rooms = self.rooms.get(last.host, {}) if last is not None else {}
        mine = [rooms[g] for g in (last.gpus if last is not None else []) if g in rooms]
        host = last.host if last is not None and len(mine) >= count else None
        if host is None:
            choices = [(sorted(rs.values(), key=lambda r: (r.jobs, r.holds))[:count], name)
                       for name, rs in self.rooms.items() if len(rs) >= count]
            if not choices:
                return f"waiting for {count} GPU(s) of one host to itself"
            mine, host = min(choices, key=lambda c: sum(r.jobs for r in c[0]))
        for room in mine[:count]:
            room.reserved = True
        gpus = ", ".join(str(r.index) for r in mine[:count])
        return (f"waits for {host} GPU {gpus} alone (attempt {job.attempts + 1} after CUDA "
                "OOMs on a shared GPU); nothing new is packed onto it")

    def _why_not(self, count: int, need: int) -> str:
        hosts = [h for h in self.hosts if self.slots[h.name] > 0]
        if not hosts:
            return "every host runs as many jobs as its max_parallel allows"
        best: tuple[int, str, Room] | None = None
        for host in hosts:
            for room in self.rooms[host.name].values():
                left = room.left(self.margin)
                if left is None or not self.sharable(host.name, room):
                    continue
                if best is None or left > best[0]:
                    best = (left, host.name, room)
        each = f" on each of {count} GPUs of one host" if count > 1 else ""
        if best is None:
            return f"no GPU can be shared now; needs {_gib(need)} GiB{each}"
        left, host_name, room = best
        total = f" of {room.total / 1024:.0f}" if room.total else ""
        return (f"{host_name} GPU {room.index} has {_gib(max(0, left))} GiB free{total}; "
                f"needs {_gib(need)}{each}")

    def biggest_first(self, queue: list[JobState]) -> list[JobState]:
        """The head of the queue, as far as this tick could look, with the jobs of the same
        priority biggest first (memory x GPUs; a job that wants its GPUs alone counts as a
        whole GPU): small jobs fill in around big ones, which otherwise wait for a GPU nearly
        empty while small ones keep taking what frees up. Jobs of one size keep queue order."""
        window = 4 * self.gpu_capacity() + 16
        head = queue[:window]
        head.sort(key=lambda job: (-job.priority, -self._size(job)))
        return head + queue[window:]

    def _size(self, job: JobState) -> int:
        spec = self.specs.get(job.id)
        if spec is None:
            return 0
        need = self.plan.need(job, spec)
        return (need.mib if need.mib is not None else WHOLE_GPU_MIB) * spec.gpus_per_job

    # ---- CPU-only jobs ---------------------------------------------------------------------

    def cpu_capacity(self) -> int:
        return sum(self.cpu_left.values())

    def place_cpu(self, job: JobState) -> Launch | str:
        host = max(self.hosts, key=lambda h: self.cpu_left[h.name], default=None)
        if host is None or self.cpu_left[host.name] <= 0:
            return "waiting for a CPU slot (max_cpu_jobs)"
        self.cpu_left[host.name] -= 1
        return Launch(job.id, host.name, ())


class _GpuSeat:
    def __init__(self, placer: MemoryPlacer) -> None:
        self.placer = placer

    def order(self, queue: list[JobState]) -> list[JobState]:
        return self.placer.biggest_first(queue)

    def capacity(self) -> int:
        return self.placer.gpu_capacity()

    def place(self, job: JobState, spec: JobSpec) -> Launch | str:
        return self.placer.place_gpu(job, spec)

    def full(self) -> str:
        return self.placer.gpu_full()


class _CpuSeat:
    def __init__(self, placer: MemoryPlacer) -> None:
        self.placer = placer

    def order(self, queue: list[JobState]) -> list[JobState]:
        return queue

    def capacity(self) -> int:
        return self.placer.cpu_capacity()

    def place(self, job: JobState, spec: JobSpec) -> Launch | str:
        return self.placer.place_cpu(job)

    def full(self) -> str:
        return "waiting for a CPU slot (max_cpu_jobs)"
