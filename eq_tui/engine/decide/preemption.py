"""Preemption by priority: which running job a waiting `preempt` job may stop, and where it then
starts. Pure: the caller gives what this engine's tick knows, in the plain shapes below.

A waiting job with `preempt: true` that fits on no GPU now may stop one running job of this
engine with a lower priority that has a checkpoint contract (with `preempt: force`, any job of
lower priority), preempted fewer than its `max_preemptions` times, on a host where stopping it
alone makes the waiting job fit: room a shared GPU has left counts, a GPU drained or
quarantined, another engine's claim or other people's memory never. Of several, the lowest
priority goes, then the one started last (the least work lost), then by id. One victim at a
time per preemptor: while a victim has its grace, no other is chosen for it, and the GPUs the
victim frees are kept for the preemptor (`reserved`), not given to the next job in the queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Preempt = bool | Literal["force"]


@dataclass(frozen=True)
class Gpu:
    """One GPU of ours as the tick sees it."""

    host: str
    index: int
    total_mib: int | None  # None: not read yet; nothing is decided on it
    others_mib: int  # what processes not of this engine's jobs hold there
    usable: bool = True  # False: drained, quarantined, not allowed or claimed by another engine


@dataclass(frozen=True)
class Running:
    """A running job of this engine."""

    id: str
    host: str
    gpus: tuple[int, ...]
    priority: int
    started_at: float
    hold_mib: int | None  # what it holds on each of its GPUs; None: it has them alone
    has_contract: bool  # a checkpoint contract: it resumes where it was
    preemptions: int = 0  # how often it was preempted in this run
    max_preemptions: int = 3


@dataclass(frozen=True)
class Waiting:
    """A waiting job that may preempt."""

    id: str
    priority: int
    preempt: Preempt
    gpus_per_job: int
    need_mib: int | None  # per GPU; None: it takes its GPUs alone


@dataclass(frozen=True)
class Preemption:
    """`preemptor` stops `victim` and starts on `host`'s `gpus` once they are free."""

    preemptor: str
    victim: str
    host: str
    gpus: tuple[int, ...]

    def where(self) -> str:
        return f"{self.host}:{','.join(map(str, self.gpus))}"

    def reason(self) -> str:
        """The preemptor's waiting reason while the victim has its grace."""
        return f"preempting {self.victim} on {self.where()}; then waits for its memory"


@dataclass(frozen=True)
class Limits:
    margin_mib: int = 0  # kept free on every shared GPU (gpu_margin_mib)
    free_threshold_mib: int = 1000  # a GPU below this much used may be taken alone


NO_PREEMPT = "preempt is not set"


def choose(job: Waiting, gpus: Sequence[Gpu], running: Sequence[Running],
           in_flight: Iterable[Preemption] = (), limits: Limits = Limits()) -> Preemption | str:
    """The preemption `job` makes now, or why it makes none. `job` fits on no GPU now (the
    caller asked placement first); `in_flight` are the preemptions whose victims still run."""
    if not job.preempt:
        return NO_PREEMPT
    flights = list(in_flight)
    for flight in flights:
        if flight.preemptor == job.id:
            return flight.reason()
    taken = {flight.victim for flight in flights}
    victims = [run for run in running
               if run.priority < job.priority and run.id not in taken
               and (run.has_contract or job.preempt == "force")
               and run.preemptions < run.max_preemptions]
    if not victims:
        return _none_reason(job, running, taken)
    victims.sort(key=lambda run: (run.priority, -run.started_at, run.id))
    reserved = {(flight.host, gpu) for flight in flights for gpu in flight.gpus}
    for victim in victims:
        chosen = _fits_without(job, victim, gpus, running, reserved, limits)
        if chosen is not None:
            return Preemption(job.id, victim.id, victim.host, chosen)
    return (f"preempt: no job of lower priority frees enough room for it "
            f"({len(victims)} looked at)")


def _none_reason(job: Waiting, running: Sequence[Running], taken: set[str]) -> str:
    lower = [run for run in running if run.priority < job.priority and run.id not in taken]
    if not lower:
        return "preempt: no running job of lower priority"
    if job.preempt != "force" and not any(run.has_contract for run in lower):
        return "preempt: no running job of lower priority has a checkpoint contract"
    return "preempt: the jobs of lower priority were preempted their max_preemptions times"


def _fits_without(job: Waiting, victim: Running, gpus: Sequence[Gpu],
                  running: Sequence[Running], reserved: set[tuple[str, int]],
                  limits: Limits) -> tuple[int, ...] | None:
    """The GPUs of the victim's host `job` would fit on once the victim has stopped (those the
    victim frees first), or None."""
    holds: dict[int, int] = {}
    alone: set[int] = set()
    ours: set[int] = set()  # GPUs another job of ours keeps using
    for run in running:
        if run.id == victim.id or run.host != victim.host:
            continue
        for index in run.gpus:
            ours.add(index)
            if run.hold_mib is None:
                alone.add(index)
            else:
                holds[index] = holds.get(index, 0) + run.hold_mib
    fits: list[int] = []
    for gpu in gpus:
        if (gpu.host != victim.host or not gpu.usable or gpu.total_mib is None
                or (gpu.host, gpu.index) in reserved or gpu.index in alone):
            continue
        if job.need_mib is None:
            ok = gpu.index not in ours and gpu.others_mib < limits.free_threshold_mib
        else:
            left = (gpu.total_mib - gpu.others_mib - holds.get(gpu.index, 0)
                    - limits.margin_mib)
            ok = left >= job.need_mib
        if ok:
            fits.append(gpu.index)
    if len(fits) < job.gpus_per_job or not set(fits) & set(victim.gpus):
        return None
    fits.sort(key=lambda index: (index not in victim.gpus, index))
    return tuple(sorted(fits[:job.gpus_per_job]))


def reserved(in_flight: Iterable[Preemption]) -> dict[tuple[str, int], str]:
    """(host, GPU) -> the preemptor it is kept for: no other job is placed there."""
    return {(flight.host, gpu): flight.preemptor for flight in in_flight for gpu in flight.gpus}


def settled(in_flight: Iterable[Preemption], running_ids: Iterable[str],
            waiting_ids: Iterable[str]) -> list[Preemption]:
    """The preemptions still under way: the victim still runs and the preemptor still waits.
    The others are done (the preemptor started, or left the queue) and release their GPUs."""
    runs = set(running_ids)
    waits = set(waiting_ids)
    return [flight for flight in in_flight
            if flight.victim in runs or flight.preemptor in waits]

