"""Seeing the hosts: probe requests, probing, the link state and GPU views that probes give,
the once-per-host output scan, and precondition results."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from eq_tui.api.events import HostProbed, HostStateChanged
from eq_tui.api.gpu_view import gpu_views, node_views
from eq_tui.api.holders import holders_of
from eq_tui.api.model import JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.lab_rules import rule_reasons, with_rules
from eq_tui.engine.decide.scheduler import GpuView, HostView
from eq_tui.engine.state.host_record import HostRecord
from eq_tui.engine.tick.claims import with_claims
from eq_tui.engine.tick.memory import MemoryBook
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptRef, HostSnapshot, PathCheck, ProbeRequest
from eq_tui.manifest.launchvars import substitute

Readings = dict[str, dict[int, int]]  # host -> GPU -> MiB used, from a watcher


class Observation:
    def __init__(self, ctx: RunContext, released_at: Mapping[tuple[str, int], float],
                 want_health: Callable[[str], bool] | None = None,
                 memory: MemoryBook | None = None,
                 wants: Callable[[str], str] | None = None) -> None:
        self.ctx = ctx
        self.wants = wants  # what a host's probe says of our waiting (claims.Wants)
        self.memory = memory  # what each job holds on its GPUs, for the views
        self.want_health = want_health  # whether a host's probe reads GPU health this time
        self.released_at = released_at  # (host, gpu) -> when our job left it (pacing's)
        self.precondition_results: dict[str, bool] = {}
        self.want_preconditions: set[str] = set()
        # the logs to read from an offset this probe (early stopping's); None: none ever
        # what placement may not use now (the GPUs a preempted job is freeing: tick/preempt.py)
        self.hide: Callable[[list[HostView]], list[HostView]] | None = None
        self.follow: Callable[[Iterable[AttemptRef]], tuple[tuple[str, int], ...]] | None \
            = None

    # ---- probing ---------------------------------------------------------------------------

    def request(self, host: str) -> ProbeRequest:
        ctx = self.ctx
        attempts = ctx.ledger.attempts_by_host().get(host, [])
        # once per host (the first probe): are pending jobs' outputs there already?
        scanned = ctx.hosts[host].output_scanned
        output_checks = [] if scanned else ctx.ledger.pending_output_checks()
        preconditions = []
        for job_id in sorted(self.want_preconditions):
            spec = ctx.ledger.specs.get(job_id)
            if spec is None:
                continue
            for i, pre in enumerate(spec.preconditions):
                pattern = substitute(pre.path, run_dir=ctx.run_dir_value(), job_id=job_id)
                preconditions.append(PathCheck(f"{job_id}#{i}", pattern))
        return ProbeRequest(attempts=tuple(attempts), output_checks=tuple(output_checks),
                            preconditions=tuple(preconditions), cwd=ctx.cwd_for(host),
                            health=self.want_health(host) if self.want_health else False,
                            cores=ctx.hosts[host].cores is None,
                            want=self.wants(host) if self.wants else None,
                            follow=self.follow(attempts) if self.follow is not None else ())

    async def _probe_one(self, name: str, request: ProbeRequest) -> HostSnapshot:
        try:
            return await self.ctx.hosts[name].host.probe(request)
        except HostError as exc:
            return HostSnapshot(host=name, ok=False, taken_at=self.ctx.clock(), error=str(exc))
        except Exception as exc:  # a host bug must not stop the other hosts
            return HostSnapshot(host=name, ok=False, taken_at=self.ctx.clock(),
                                error=f"probe failed: {exc!r}")

    async def probe(self, requests: dict[str, ProbeRequest]) -> list[HostSnapshot]:
        for name in requests:
            self.ctx.hosts[name].probes += 1
        return await asyncio.gather(*(self._probe_one(name, request)
                                      for name, request in requests.items()))

    def apply(self, requests: dict[str, ProbeRequest], results: list[HostSnapshot],
              probed: set[str] | None = None) -> None:
        """Take in this tick's probes: snapshots, links, GPU views, precondition results. A
        probe older than the host's snapshot (an exit's tick ran while this one's probes were
        out) is dropped, and its host leaves `probed`: the newer one was judged already."""
        ctx = self.ctx
        now = ctx.clock()
        holders = ctx.ledger.held_gpus()
        checked: set[str] = set()
        for name, snap in zip(list(requests), results, strict=True):
            known = ctx.hosts[name].snapshot
            if probed is not None and known is not None and snap.taken_at < known.taken_at:
                probed.discard(name)
                continue
            ctx.hosts[name].snapshot = snap
            ctx.hosts[name].note_gpus(snap)
            if snap.cores:
                ctx.hosts[name].cores = snap.cores
            self._update_link(name, snap)
            if snap.ok:
                checked.update(key.split("#", 1)[0] for key in snap.preconditions)
            self._publish_host(name, snap, holders, now)
        # A job with several preconditions is ready only when every one matched (on any host).
        for job_id in checked & self.want_preconditions:
            spec = ctx.ledger.specs.get(job_id)
            if spec is not None and spec.preconditions:
                self.precondition_results[job_id] = _all_met(job_id, len(spec.preconditions),
                                                             results)

    def _update_link(self, name: str, snap: HostSnapshot) -> None:
        link = self.ctx.hosts[name].link
        new_state = "up" if snap.ok else "down"
        link.rtt_s = snap.rtt_s if snap.ok else None
        for warning in snap.warnings:
            if warning not in link.warnings:
                self.ctx.bus.alert("warning", f"{name}: {warning}", host=name)
        link.warnings = list(snap.warnings)
        if link.state != new_state:
            link.state = new_state
            link.since = snap.taken_at
            link.reason = snap.error or ""
            self.ctx.bus.publish(HostStateChanged(project=self.ctx.project, at=self.ctx.clock(),
                                                  host=name, state=new_state,
                                                  reason=snap.error or ""))
            if new_state == "down":
                self.ctx.bus.alert("error", f"{name} is down: {snap.error}", host=name)

    # ---- views -----------------------------------------------------------------------------

    def gpu_views(self, name: str, snap: HostSnapshot, holders: Mapping[tuple[str, int], str],
                  now: float) -> list[dict[str, Any]]:
        record = self.ctx.hosts[name]
        views = gpu_views(name, snap.gpus, allowed=record.allowed, holders=holders,
                          released_at=self.released_at,
                          quarantined=frozenset(record.quarantined),
                          reasons=record.quarantine_reasons, processes=snap.processes,
                          threshold_mib=self.ctx.manifest.gpu_free_threshold_mib, now=now,
                          sharing=self._sharing(name))
        ours = {a.pgid for a in snap.attempts.values() if a.pgid is not None}
        closed = rule_reasons(name, snap)
        drained = record.cordoned()
        for view in views:  # who holds it: ours, other eq-tui users' jobs, other processes
            if view["index"] in drained:
                view["drained"] = True
            view["holders"] = holders_of(view, snap, ours, self.ctx.project, self.ctx.token)
            if view["index"] in closed:  # a lab rule keeps it from us now
                view["rule"] = closed[view["index"]]
        return views

    def _sharing(self, host: str) -> dict[int, list[dict[str, Any]]]:
        """GPU -> our jobs on it with what each holds and uses, where jobs share GPUs."""
        plan = self.memory.plan() if self.memory is not None else None
        if plan is None:
            return {}
        found: dict[int, list[dict[str, Any]]] = {}
        for ref in self.ctx.ledger.attempts_by_host().get(host, []):
            job = self.ctx.ledger.jobs.get(ref.key)
            if job is None:
                continue
            hold = plan.hold(job)
            for gpu in job.gpus:
                found.setdefault(gpu, []).append(
                    {"id": job.id, "mib": hold.mib, "used": hold.now.get(gpu, 0)})
        return found

    def _publish_host(self, name: str, snap: HostSnapshot,
                      holders: Mapping[tuple[str, int], str], now: float) -> None:
        views = self.gpu_views(name, snap, holders, now)
        self.ctx.bus.publish(HostProbed(project=self.ctx.project, at=now, host=name, ok=snap.ok,
                                        rtt_s=snap.rtt_s, gpus=tuple(views), error=snap.error,
                                        warnings=snap.warnings, nodes=tuple(node_views(snap))))

    def publish_gpu_views(self, names: set[str]) -> None:
        """The grid's view right after launches: the new jobs on their GPUs, no new probe."""
        now = self.ctx.clock()
        holders = self.ctx.ledger.held_gpus()
        for name in names:
            snap = self.ctx.hosts[name].snapshot
            if snap is not None and snap.ok:
                self._publish_host(name, snap, holders, now)

    def host_views(self, probed: set[str] | None, readings: Readings | None = None,
                   draining: Mapping[str, frozenset[int]] | None = None) -> list[HostView]:
        others = self.memory.others if self.memory is not None else None
        views = host_views(self.ctx.hosts, probed, readings, others,
                           me=(self.ctx.project, self.ctx.token), draining=draining)
        return views if self.hide is None else self.hide(views)

    # ---- what the first probes found -------------------------------------------------------

    def apply_output_scan(self) -> None:
        """Pending jobs whose output is already on a host (checked once per host) are
        completed without launching."""
        ledger = self.ctx.ledger
        for record in self.ctx.hosts.values():
            snap = record.snapshot
            if snap is None or not snap.ok or record.output_scanned:
                continue
            record.output_scanned = True
            for job_id, exists in snap.output_checks.items():
                job = ledger.jobs.get(job_id)
                if exists and job is not None and job.status.is_waiting:
                    ledger.update(job, retry_at=None)
                    ledger.set_status(job, JobStatus.COMPLETED,
                                      detail="output already exists; not launched")
                    ledger.update(job, reason="output already exists; not launched")


def _all_met(job_id: str, count: int, snaps: Iterable[HostSnapshot]) -> bool:
    met = [False] * count
    for snap in snaps:
        if not snap.ok:
            continue
        for i in range(count):
            if snap.preconditions.get(f"{job_id}#{i}"):
                met[i] = True
    return all(met)


def host_views(hosts: Mapping[str, HostRecord], probed: set[str] | None,
               readings: Readings | None = None,
               others: Mapping[str, Mapping[int, int]] | None = None, *,
               me: tuple[str, str] | None = None,
               draining: Mapping[str, frozenset[int]] | None = None) -> list[HostView]:
    """What decide() may use. With `probed`, a host not probed this tick takes no launch,
    except on the GPUs in `readings` (a watcher's fresh reading; its others count as
    unknown). `others`: host -> GPU -> memory of processes not our jobs' (last probe).
    `me` (project, token): other engines' claims count as held (claims.py). `draining`: the
    GPUs a job of ours just left that a launch may wait on (drain_launch.py) count as empty."""
    views = []
    for name, record in hosts.items():
        foreign = (others or {}).get(name, {})
        snap = record.snapshot
        fresh = (readings or {}).get(name)
        usable = (snap is not None and snap.ok and record.stopped is None
                  and (probed is None or name in probed or fresh is not None))
        if snap is None:
            gpus: tuple[GpuView, ...] = ()
        elif probed is None or name in probed or fresh is None:
            drained = (draining or {}).get(name, frozenset())
            gpus = tuple(GpuView(g.index, 0, g.memory_total_mib, 0) if g.index in drained
                         else GpuView(g.index, g.memory_used_mib, g.memory_total_mib,
                                      foreign.get(g.index)) for g in snap.gpus)
        else:
            gpus = tuple(GpuView(g.index, fresh.get(g.index), g.memory_total_mib,
                                 foreign.get(g.index)) for g in snap.gpus)
        if me is not None:
            gpus = with_claims(gpus, snap, *me)
        views.append(cordoned(record, with_rules(HostView(
            name=name, usable=usable, gpus=gpus, allowed=record.allowed,
            max_parallel=record.spec.max_parallel if record.spec else 8,
            max_parallel_given=record.spec.max_parallel_given if record.spec else True,
            quarantined=frozenset(record.quarantined),
            max_jobs_per_gpu=record.spec.max_jobs_per_gpu if record.spec else None,
            max_cpu_jobs=record.max_cpu_jobs), snap)))  # the lab's rules (lab.py)
    return views


def cordoned(record: HostRecord, view: HostView) -> HostView:
    """The host as placement may use it while a person has it drained (`eq-tui drain`): its
    drained GPUs are no longer ours to take (left out of `allowed`, as the lab's closed ones
    are, so a waiting job's reason says "drained", not "quarantined"), and a whole host
    drained takes no CPU-only job either."""
    if record.cordon is None:
        return view
    every = frozenset(gpu.index for gpu in view.gpus)
    allowed = view.allowed if view.allowed is not None else every
    whole = isinstance(record.cordon, str)
    closed = every if whole else record.cordoned()
    note = f"{view.name} drained" if whole else \
        f"{view.name} GPU {','.join(map(str, sorted(closed)))} drained"
    return replace(view, allowed=allowed - closed, notes=(*view.notes, note),
                   max_cpu_jobs=0 if whole else view.max_cpu_jobs)
