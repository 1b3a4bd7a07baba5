"""When to tick and which hosts to probe: a full tick every `poll` seconds; in between, partial
ticks for the hosts a watcher reported an exit on, quick ones while a GPU we released drains
with no watcher to report it, and light ticks on a watcher's reading of a released GPU."""

from __future__ import annotations

import asyncio
import time

from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.scheduler import free_gpus
from eq_tui.engine.tick.host_watchers import HostWatchers
from eq_tui.engine.tick.observation import host_views
from eq_tui.hosts.watch import WatchEvent

HURRY_POLL_S = 0.25  # tick interval while a released GPU drains (memory release is not polled)
HURRY_WINDOW_S = 10.0

Readings = dict[str, dict[int, int]]


class Pacing:
    def __init__(self, ctx: RunContext, poll: float) -> None:
        self.ctx = ctx
        self.poll = poll
        self.watchers: HostWatchers | None = None  # set by the engine once built
        self.wake_event = asyncio.Event()
        self.released_at: dict[tuple[str, int], float] = {}
        self.ticks = 0
        self.full_ticks = 0
        self.watch_wakeups = 0
        self.launches_on_watch_reading = 0
        self._hurry_until = 0.0
        self._full_due = True
        self._last_full_tick = 0.0
        self._due_hosts: set[str] = set()
        self._watch_readings: Readings = {}
        self._watch_seen_free: dict[tuple[str, int], float] = {}

    # ---- what the engine tells it ------------------------------------------------------------

    def released(self, host: str, gpus: list[int], now: float) -> None:
        """A job of ours left these GPUs: their memory drains from now."""
        for gpu in gpus:
            self.released_at[(host, gpu)] = now
        self._hurry_until = now + HURRY_WINDOW_S

    def ticked(self, full: bool) -> None:
        self.ticks += 1
        if full:
            self.full_ticks += 1
            self._last_full_tick = time.monotonic()

    def wake(self, *, full: bool = False) -> None:
        if full:
            self._full_due = True
        self.wake_event.set()

    def on_watch_event(self, host: str, event: WatchEvent) -> None:
        if event.kind == "exited":
            self._due_hosts.add(host)  # judging an exit needs the probe (exit code, output)
            self.watch_wakeups += 1
            self.wake_event.set()
        elif event.kind == "released" and event.gpu is not None and event.used_mib is not None:
            self._watch_readings.setdefault(host, {})[event.gpu] = event.used_mib
            self._watch_seen_free[(host, event.gpu)] = self.ctx.clock()
            self.watch_wakeups += 1
            self.wake_event.set()
        elif event.kind == "error":
            self.ctx.bus.alert("warning", f"{host}: watcher: {event.detail}", host=host)

    # ---- what it answers -------------------------------------------------------------------

    def hosts_due(self) -> set[str] | None:
        """The hosts the next tick probes: None for all of them (a full tick)."""
        now = time.monotonic()
        if self._full_due or now - self._last_full_tick >= self.poll * 0.95:
            self._full_due = False
            self._due_hosts.clear()
            return None
        due = set(self._due_hosts)
        self._due_hosts.clear()
        if self.ctx.paused or not self.ctx.ledger.any_job_due(self.ctx.clock()):
            return due
        due |= self.hurry_hosts()
        # a job that came due (an OOM retry's delay is up) may fit a GPU that already
        # looked free: probe that host again before launching there
        due |= self._hosts_with_free_gpus()
        return due

    def take_watch_readings(self, probed: set[str] | None) -> Readings:
        """GPU releases a watcher read on hosts this tick does not probe: the tick may launch
        on those GPUs on the strength of that reading (fresher than any probe would be)."""
        readings = {host: gpus for host, gpus in self._watch_readings.items()
                    if probed is not None and host not in probed}
        self._watch_readings = {}
        return readings if not self.ctx.paused else {}

    def take_exits(self) -> set[str]:
        """The hosts a watcher reported an exit on since the last tick began (probed now)."""
        due, self._due_hosts = self._due_hosts, set()
        return due

    def more_due(self) -> bool:
        """An exit or a release came in while the last tick ran."""
        return bool(self._due_hosts or self._watch_readings)

    def draining(self) -> dict[str, list[int]]:
        """GPUs we released recently whose last reading still shows their memory in use."""
        ctx = self.ctx
        now = ctx.clock()
        threshold = ctx.manifest.gpu_free_threshold_mib
        draining: dict[str, list[int]] = {}
        holders = ctx.ledger.held_gpus()
        for (host, gpu), released in self.released_at.items():
            if now - released > HURRY_WINDOW_S or (host, gpu) in holders:
                continue
            seen = self._watch_seen_free.get((host, gpu))
            if seen is not None and seen >= released:
                continue  # a watcher read it below the threshold since
            record = ctx.hosts.get(host)
            snap = record.snapshot if record else None
            reading = next((g for g in snap.gpus if g.index == gpu), None) if snap else None
            if (reading is None or snap is None or snap.taken_at < released
                    or reading.memory_used_mib is None
                    or reading.memory_used_mib >= threshold):
                draining.setdefault(host, []).append(gpu)
        return draining

    def hurry_hosts(self) -> set[str]:
        """Hosts with a draining GPU whose release no watcher will report: probed quickly."""
        covered = self.watchers.covers_gpus if self.watchers is not None else (lambda _: False)
        return {host for host in self.draining() if not covered(host)}

    def _hosts_with_free_gpus(self) -> set[str]:
        holders = self.ctx.ledger.held_gpus()
        threshold = self.ctx.manifest.gpu_free_threshold_mib
        return {view.name for view in host_views(self.ctx.hosts, None,
                                                 me=(self.ctx.project, self.ctx.token))
                if free_gpus(view, holders, threshold)}

    def next_wait(self) -> float:
        """Seconds to the next tick: the rest of the poll interval; less while a GPU we just
        released drains with no watcher to report it, or when an OOM retry comes due."""
        wait = max(0.0, self._last_full_tick + self.poll - time.monotonic())
        if self.ctx.paused:
            return wait
        now = self.ctx.clock()
        if now < self._hurry_until and self.hurry_hosts() \
                and self.ctx.ledger.any_job_due(now):
            wait = min(wait, HURRY_POLL_S)
        retry = self.ctx.ledger.next_retry(now)
        if retry is not None:
            wait = min(wait, max(0.0, retry - now) + 0.01)
        return wait
