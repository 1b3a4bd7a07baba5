"""Launches that wait on the host for a GPU's memory to drain.

A job of ours ends and its GPU's memory goes a moment later (CUDA's teardown, a data loader's
last worker). The next job used to wait until that release was seen (the watcher's reading, its
event, a tick) before its launch even began: a round trip and a session's start after the memory
had gone. Instead, the tick that judges the exit places the next job on the draining GPU at once,
and its launch waits on the host (launch.sh, _drain_wait.sh) until the memory reads below the
free threshold: the job starts as the memory goes, and never before.

Only on a GPU whose memory is all going: no process of someone else's runs there (every one
listed is gone or one of our attempts'), so that it reads empty once drained (another's job
beside it would keep it above the threshold: no wait could end).
Only on a host no other engine uses now (none of its claims there, no other user's engine
waiting there): where one does, a freed GPU is the fair turns' to give (_fair_turns.sh) the
moment it reads free, as before. Only on hosts whose GPUs a watcher reads (without one, the
periodic probe's drain polling stays as it is), only for launches that run beside the next tick
(a launch the tick awaits would hold it), at most MAX_PER_HOST at once on a host (each waits on
a channel of the host's connection), and not again on a GPU whose memory was not released in
time, until a job of ours leaves it again. A launch that waited in vain is refused like one the
claims refused: nothing started, no attempt spent, the job placed again on what the next probe
shows.
"""

from __future__ import annotations

from collections.abc import Mapping

from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.tick_timing import Pacing
from eq_tui.hosts.base import DrainWait, HostSnapshot
from eq_tui.hosts.claims import others
from eq_tui.hosts.watch import DRAIN_INTERVAL_S

DRAIN_WAIT_S = 10.0  # longer than any release seen (simulated lingering: 1-3 s; an H100: 0.5 s)
MAX_PER_HOST = 3


class DrainLaunches:
    def __init__(self, ctx: RunContext, pacing: Pacing) -> None:
        self.ctx = ctx
        self.pacing = pacing
        self.wait_s = DRAIN_WAIT_S
        self.plan: dict[str, frozenset[int]] = {}
        self.placed = 0  # launches that waited on their host (the benchmarks report it)
        self._waiting: dict[str, tuple[str, tuple[int, ...]]] = {}  # session -> host, GPUs
        # (host, gpu) -> the release after which a launch there waited in vain
        self._in_vain: dict[tuple[str, int], float] = {}

    def gpus(self, probed: set[str] | None, background: bool) -> Mapping[str, frozenset[int]]:
        """The draining GPUs this tick may place a job on (host -> GPUs): decide() sees them
        free, and a launch on them waits for their memory on the host."""
        self.plan = {}
        watchers = self.pacing.watchers
        if not background or watchers is None or self.ctx.paused:
            return self.plan
        released = self.pacing.released_at
        for host, gpus in self.pacing.draining().items():
            if (probed is not None and host not in probed) or not watchers.covers_gpus(host):
                continue
            snap = self.ctx.hosts[host].snapshot
            if snap is None or shared_with_others(snap, self.ctx.project, self.ctx.token):
                continue
            room = MAX_PER_HOST - sum(1 for waiting, _ in self._waiting.values() if waiting == host)
            ready = [gpu for gpu in gpus
                     if self._in_vain.get((host, gpu)) != released.get((host, gpu))
                     and all_going(snap, gpu)]
            if room > 0 and ready:
                self.plan[host] = frozenset(ready[:room])
        return self.plan

    def watch_after_exit(self, host: str) -> bool:
        """Whether the host's watcher, seeing an attempt exit, should read its GPUs until their
        memory goes. Not where a launch placed there waits for that itself (it would read the
        same nvidia-smi ten times a second beside it, on every exit of a sweep); a GPU that no
        such launch took comes back as the watcher's `draining` after the exit's tick."""
        snap = self.ctx.hosts[host].snapshot if host in self.ctx.hosts else None
        return snap is None or shared_with_others(snap, self.ctx.project, self.ctx.token)

    def wait_for(self, host: str, gpus: tuple[int, ...]) -> DrainWait | None:
        """What a launch on these GPUs waits for on the host (None: nothing drains there)."""
        draining = tuple(gpu for gpu in gpus if gpu in self.plan.get(host, ()))
        if not draining:
            return None
        return DrainWait(gpus=draining, below_mib=self.ctx.manifest.gpu_free_threshold_mib,
                         rounds=max(1, round(self.wait_s / DRAIN_INTERVAL_S)),
                         every_s=DRAIN_INTERVAL_S)

    def started(self, session: str, host: str, drain: DrainWait) -> None:
        self._waiting[session] = (host, drain.gpus)
        self.placed += 1

    def ended(self, session: str, *, in_vain: bool) -> None:
        """The launch returned; `in_vain`: refused (its GPUs did not drain, or the claims)."""
        host, gpus = self._waiting.pop(session, ("", ()))
        if in_vain:
            for gpu in gpus:
                self._in_vain[(host, gpu)] = self.pacing.released_at.get((host, gpu), 0.0)


def all_going(snap: HostSnapshot, gpu: int) -> bool:
    """Whether everything the GPU holds is ours and going: each process the probe listed there
    gone or in one of our attempts' process groups (other engines' claims keep the whole host
    out first: shared_with_others)."""
    uuid = next((reading.uuid for reading in snap.gpus if reading.index == gpu), None)
    ours = {probe.pgid for probe in snap.attempts.values() if probe.pgid is not None}
    return uuid is not None and all(
        process.running is False or process.pgid in ours or process.sid in ours
        for process in snap.processes if process.gpu_uuid == uuid)


def shared_with_others(snap: HostSnapshot, project: str, token: str) -> bool:
    """Whether another engine holds a claim on the host or another user's engine waits there."""
    waiting = snap.lab is not None and bool(snap.lab.waiting)
    return waiting or bool(others(snap.claims, project, token))
