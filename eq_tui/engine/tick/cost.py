"""What each attempt cost: GPU-seconds and energy, metered from the probes the hosts already
answer (no round trip of its own).

Each GPU reading carries the board's power draw (`power.draw` in the probe's one nvidia-smi
query) and, on a local host read through NVML, its total-energy counter. Between two probes of
a host a GPU's mean power is the counter's difference over the time between them where both
readings have it, else the mean of the two power readings (the trapezoid), else the one there
is; where one of our attempts started or ended on it in between, each reading's power holds on
its side of that moment (a job's start or end is a step in the GPU's power, not a ramp). An
attempt is metered from where it was metered to (its host-stamped start, the first time)
up to this probe, or its end: that power x the time x its share of the GPU.

Its share: a GPU it was placed on alone is all its own (`shared` false). A shared GPU is split
among the processes on it by their own utilisation (`nvidia-smi pmon`, NVML's process samples:
the probe reads them whenever a GPU has several processes); a sample in which none computed,
or with no process there, keeps the last probe's shares; without those, by the memory each
holds, and where none holds any yet, equally among our attempts placed there. A
share between two probes is the opening probe's until the last start or end of one of our
attempts on that GPU in between, the closing probe's after it (the mean of the two where
nothing started or ended): the shares of an interval add up to the GPU, to within the
processes' own start-up. GPU-seconds are the attempt's time x its GPUs less what others had
of its shared GPUs (`shared_off_s`, metered the same way). A GPU with no power reading ([N/A],
a Slurm placeholder) leaves the attempt's energy unknown (`energy_gap`), never a smaller
figure. A probe that finds an attempt's processes gone before its exit record meters it to
that probe; the one that reads its end takes the part after it back (`_take_back`).

The figures live on the attempt (state file): written when it ends and at most once a minute
while it runs, so a restarted engine goes on from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eq_tui.api.model import Attempt, JobState
from eq_tui.engine.context import RunContext
from eq_tui.hosts.base import GpuReading, HostSnapshot

SAVE_EVERY_S = 60.0  # a running attempt's figures are written at most this often

# GPU -> (when it was read, its power in W, its energy counter in J)
Readings = dict[int, tuple[float, float | None, float | None]]


def interval_watts(before: tuple[float, float | None, float | None] | None,
                   after: tuple[float, float | None, float | None]) -> float | None:
    """A GPU's mean power between two readings (None: no reading says)."""
    t1, p1, e1 = after
    if before is not None:
        t0, p0, e0 = before
        if e0 is not None and e1 is not None and t1 > t0 and e1 >= e0:
            return (e1 - e0) / (t1 - t0)
        if p0 is not None and p1 is not None:
            return (p0 + p1) / 2
        if p1 is None:
            return p0
    return p1


def gpu_shares(snap: HostSnapshot, placed: Mapping[int, list[str]],
               groups: Mapping[str, int | None],
               previous: Mapping[str, Mapping[int, float]] | None = None,
               ) -> dict[str, dict[int, float]]:
    """Our shared attempts' shares of each GPU they are on (job id -> GPU -> 0..1). `placed`:
    GPU -> the shared attempts there; `groups`: job id -> its process group; `previous`: the
    shares at the last probe, kept through a sample in which no process computed or none is
    there (a gap in the per-process samples, or jobs between their processes: at their end,
    not a reason to split by memory or equally) where each job there had one."""
    index = {gpu.uuid: gpu.index for gpu in snap.gpus}
    on_gpu: dict[int, list[tuple[int | None, int | None, int | None, int | None]]] = {}
    for p in snap.processes:
        at = index.get(p.gpu_uuid)
        if at is not None and at in placed:
            on_gpu.setdefault(at, []).append((p.pgid, p.sid, p.util_pct, p.used_mib))
    shares: dict[str, dict[int, float]] = {}
    for gpu, jobs in placed.items():
        procs = on_gpu.get(gpu, [])
        util_total = sum(u or 0 for _, _, u, _ in procs)
        mib_total = sum(m or 0 for _, _, _, m in procs)
        kept = {job_id: (previous or {}).get(job_id, {}).get(gpu) for job_id in jobs}
        if util_total <= 0 and len(procs) != 1 and None not in kept.values():
            for job_id, share in kept.items():
                shares.setdefault(job_id, {})[gpu] = share or 0.0
            continue
        for job_id in jobs:
            group = groups.get(job_id)
            mine = [p for p in procs if group is not None and group in (p[0], p[1])]
            if util_total > 0:
                share = sum(u or 0 for _, _, u, _ in mine) / util_total
            elif mib_total > 0:
                share = sum(m or 0 for _, _, _, m in mine) / mib_total
            else:
                share = 1.0 / len(jobs)
            shares.setdefault(job_id, {})[gpu] = share
    return shares


class CostBook:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.readings: dict[str, Readings] = {}  # host -> its GPUs at its last probe
        self.shares: dict[str, tuple[int, dict[int, float]]] = {}  # job -> (attempt, shares)
        self.saved: dict[str, float] = {}  # job -> metered_until when last written
        # job -> its last interval: (its span, joules, GPU-seconds not its own, its watts at the
        # closing reading), to take back the part after its end when the probe that metered
        # it had not seen the end yet
        self.last: dict[str, tuple[float, float, float, float]] = {}

    def observe(self, probed: Iterable[str]) -> None:
        ctx = self.ctx
        active = ctx.ledger.attempts_by_host()
        for name in probed:
            record = ctx.hosts.get(name)
            snap = record.snapshot if record is not None else None
            if snap is None or not snap.ok:
                continue
            # every attempt the probe asked about (one that ended since is among them) and
            # every one active now
            ids = set(snap.attempts) | {ref.key for ref in active.get(name, [])}
            self._meter_host(name, snap, [ctx.ledger.jobs[i] for i in ids if i in ctx.ledger.jobs])

    def _meter_host(self, name: str, snap: HostSnapshot, jobs: list[JobState]) -> None:
        t1 = snap.taken_at + (snap.rtt_s or 0.0) / 2
        now = readings_of(snap.gpus, t1)
        before = self.readings.get(name, {})
        shares = self._shares_now(snap, jobs)
        changes = change_times(jobs, before, t1)
        for job in jobs:
            attempt = job.current
            if attempt is None or not attempt.launched:
                continue
            kept = self.shares.get(job.id)
            held = kept[1] if kept is not None and kept[0] == attempt.n else {}
            ended = attempt.end is not None or not job.status.is_active
            self._meter(job, attempt, t1, before, now,
                        (held, {} if ended else shares.get(job.id, {}), changes), ended)
            if ended:
                self.shares.pop(job.id, None)
                self.saved.pop(job.id, None)
                self.last.pop(job.id, None)
            else:
                self.shares[job.id] = (attempt.n, shares.get(job.id, {}))
        self.readings[name] = now

    def _shares_now(self, snap: HostSnapshot, jobs: list[JobState]) -> dict[str, dict[int, float]]:
        placed: dict[int, list[str]] = {}
        groups: dict[str, int | None] = {}
        for job in jobs:
            attempt = job.current
            if attempt is None or not attempt.shared or not job.status.is_active:
                continue
            probe = snap.attempts.get(job.id)
            groups[job.id] = probe.pgid if probe is not None else None
            for gpu in attempt.gpus:
                placed.setdefault(gpu, []).append(job.id)
        previous = {job_id: self.shares[job_id][1] for job_id in groups
                    if job_id in self.shares}
        return gpu_shares(snap, placed, groups, previous) if placed else {}

    def _meter(self, job: JobState, attempt: Attempt, t1: float, before: Readings,
               now: Readings, shares: Shares, ended: bool) -> None:
        if attempt.start is None:
            return
        if attempt.end is not None and attempt.metered_until is not None:
            self._take_back(job.id, attempt)
        a = max(attempt.start, attempt.metered_until or attempt.start)
        b = attempt.end if attempt.end is not None else t1
        if b <= a:
            return
        held, fresh, changes = shares
        joules = off = tail = 0.0
        gap = has_energy = False
        for gpu in attempt.gpus:
            reading = now.get(gpu)
            mean = interval_watts(before.get(gpu), reading) if reading is not None else None
            sides = step_watts(before.get(gpu), reading, mean)
            own = drawn = after = 0.0
            for length, share, side in segments(held, fresh, gpu, a, b, changes.get(gpu),
                                                attempt.shared):
                own += length * share  # the GPU's seconds that were its own
                watts = mean if side is None else sides[side]
                drawn += length * share * (watts or 0.0)
                # its watts at the closing reading, at its share: a take-back's rate
                after = share * ((sides[1] if side is not None else mean) or 0.0)
            tail += after
            off += (b - a) - own
            if mean is None:
                gap = True
            else:
                joules += drawn
                has_energy = True
        energy = attempt.energy_j
        if energy is None and has_energy:
            energy = 0.0
        self.ctx.ledger.update_attempt(
            attempt, energy_gap=attempt.energy_gap or gap,
            shared_off_s=attempt.shared_off_s + off,
            energy_j=energy + joules if energy is not None else None, metered_until=b)
        self.last[job.id] = (b - a, joules, off, tail)
        if ended or b - self.saved.get(job.id, attempt.start) >= SAVE_EVERY_S:
            self.saved[job.id] = b
            self.ctx.ledger.changed(job)


    def _take_back(self, job_id: str, attempt: Attempt) -> None:
        """An attempt metered past its end (the probe before the one that judged its exit
        already found it gone): the part of its last interval after the end, taken back at
        the power the closing reading gave."""
        assert attempt.end is not None and attempt.metered_until is not None
        over = attempt.metered_until - attempt.end
        last = self.last.pop(job_id, None)
        if over <= 0 or last is None or last[0] <= 0:
            return
        span, joules, off, tail = last
        part = min(1.0, over / span)
        energy = attempt.energy_j
        if energy is not None:
            # after its end the GPU drew what the closing reading says (the job was gone), not
            # the interval's mean
            energy = max(0.0, energy - min(joules, tail * span * part))
        self.ctx.ledger.update_attempt(
            attempt, shared_off_s=max(0.0, attempt.shared_off_s - off * part), energy_j=energy,
            metered_until=attempt.end)


# (shares at the probe that opened the interval, at the one that closes it, GPU -> the last
# start or end of one of our attempts there in between)
Shares = tuple[Mapping[int, float], Mapping[int, float], Mapping[int, float]]


def change_times(jobs: Iterable[JobState], before: Readings, t1: float) -> dict[int, float]:
    """GPU -> the last start or end of one of our attempts on it since its last reading: where
    its power and shares changed (they are the opening probe's before it, the closing one's
    after)."""
    changes: dict[int, float] = {}
    for job in jobs:
        attempt = job.current
        if attempt is None:
            continue
        for gpu in attempt.gpus:
            t0 = before[gpu][0] if gpu in before else None
            for at in (attempt.start, attempt.end):
                if at is not None and t0 is not None and t0 < at < t1:
                    changes[gpu] = max(changes.get(gpu, at), at)
    return changes


def step_watts(prior: tuple[float, float | None, float | None] | None,
               reading: tuple[float, float | None, float | None] | None,
               mean: float | None) -> tuple[float | None, float | None]:
    """A GPU's power before and after a change between two readings: each reading's own (the
    interval's mean where one lacks it, or where the energy counter gave the mean)."""
    if prior is None or reading is None or (prior[2] is not None and reading[2] is not None):
        return mean, mean
    return (prior[1] if prior[1] is not None else mean,
            reading[1] if reading[1] is not None else mean)


def segments(held: Mapping[int, float], fresh: Mapping[int, float], gpu: int, a: float,
             b: float, change: float | None,
             shared: bool) -> list[tuple[float, float, int | None]]:
    """a..b in parts, each (seconds, the attempt's share of the GPU, 0 before the change, 1
    after it, None without one): before a change, its share at the opening probe; after it,
    at the closing one (one it lacks: the other; none, or placed alone: the whole GPU)."""
    s0, s1 = (held.get(gpu), fresh.get(gpu)) if shared else (1.0, 1.0)
    s0 = s1 if s0 is None else s0
    s1 = s0 if s1 is None else s1
    if s0 is None or s1 is None:
        s0 = s1 = 1.0
    if change is None or not a <= change <= b:
        return [(b - a, (s0 + s1) / 2, None)]
    return [(change - a, s0, 0), (b - change, s1, 1)]


def readings_of(gpus: Iterable[GpuReading], at: float) -> Readings:
    return {g.index: (at, g.power_w, g.energy_j) for g in gpus}
