"""The engine: probe hosts → judge running jobs → decide → launch → persist → publish.

It is the only writer of run state. Front ends use it through the EngineClient interface
(snapshot, events, commands, tail); it never imports a UI toolkit. Each phase of a tick lives
in its own part: observation (probes, links, GPU views), reconcile (judging), the scheduler
(deciding, pure), launcher, ledger (every change to a job), persistence, pacing (when to tick).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from eq_tui.api.client import CommandResult, SecretsAnswer, Snapshot
from eq_tui.api.commands import Command
from eq_tui.api.events import Event, QueueFinished, QueueReopened, QueueWaiting
from eq_tui.api.gpu_view import node_views
from eq_tui.api.model import FailureClass, JobState, JobStatus, last_end, status_counts
from eq_tui.engine.commands.dispatch import Commands
from eq_tui.engine.commands.door import Door
from eq_tui.engine.commands.rerun import start_notices
from eq_tui.engine.context import RunContext, output_pattern
from eq_tui.engine.decide.scheduler import Decision, decide
from eq_tui.engine.persistence import Persistence
from eq_tui.engine.preflight.host_checks import preflight as check_hosts
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.host_record import HostLink, HostRecord
from eq_tui.engine.state.ledger import Ledger
from eq_tui.engine.state.naming import new_run_token
from eq_tui.engine.state.store import RunDir
from eq_tui.engine.tick.early_stop import EarlyStop
from eq_tui.engine.tick.gpu_health import GpuHealthWatch
from eq_tui.engine.tick.harvest import Harvest, results_settings
from eq_tui.engine.tick.host_watchers import HostWatchers
from eq_tui.engine.tick.launcher import Launcher
from eq_tui.engine.tick.leftover_memory import Leftovers
from eq_tui.engine.tick.memory import MemoryBook
from eq_tui.engine.tick.memory_asks import MemoryAsks
from eq_tui.engine.tick.observation import Observation, Readings
from eq_tui.engine.tick.preempt import Preempter
from eq_tui.engine.tick.queue_eta import QueueEtaKeeper, trials_to_come
from eq_tui.engine.tick.reconcile import Reconciler
from eq_tui.engine.tick.search_pruning import SearchPruning
from eq_tui.engine.tick.search_trials import SearchTrials
from eq_tui.engine.tick.side_by_side import ticks_side_by_side
from eq_tui.engine.tick.stall import StallWatch
from eq_tui.engine.tick.tick_timing import Pacing
from eq_tui.engine.tick.unseen import UnseenWatch
from eq_tui.engine.tick.wants import Wants
from eq_tui.errors import HostError
from eq_tui.hosts.base import Host, HostSnapshot
from eq_tui.hosts.watch import WatchedAttempt, WatchRequest
from eq_tui.manifest.model import Manifest

Closer = Callable[[], Awaitable[None]]


class Engine:
    """One project's queue. `start()`, then `run()` until it returns an exit code."""

    def __init__(self, manifest: Manifest, run_dir: Path, hosts: dict[str, Host], *,
                 poll: float = 2.0, clock: Callable[[], float] = time.time,
                 exit_when_done: bool = False, watch: bool = True,
                 await_command: float = 0.0) -> None:
        self.hosts = hosts
        self.exit_when_done = exit_when_done
        self.await_command = await_command  # seconds: see RunContext.awaiting_command_until
        self.finished = False
        self.finished_at: float | None = None  # when the last job ended, once all have
        self.exit_code: int | None = None
        store = RunDir(Path(run_dir))
        bus = Bus(manifest.project, store, clock)
        value = str(store.path.resolve())
        ledger = Ledger(manifest, bus, clock, on_release=lambda *args: self.pacing.released(*args),
                        output_pattern=lambda spec: output_pattern(spec, value))
        now = clock()
        records = {name: HostRecord(name=name, host=host, spec=manifest.host_specs.get(name),
                                    link=HostLink(state="connecting", since=now))
                   for name, host in hosts.items()}
        self.ctx = RunContext(manifest=manifest, run_dir=store, hosts=records, clock=clock,
                              bus=bus, ledger=ledger, token=new_run_token(), created=now,
                              started_at=now)
        self.lock, self._stop = asyncio.Lock(), asyncio.Event()
        self.pacing = Pacing(self.ctx, poll)
        self.gpu_health = GpuHealthWatch(self.ctx)
        self.memory = MemoryBook(self.ctx)
        self.memory_asks = MemoryAsks(self.ctx, self.memory)
        self.queue_eta = QueueEtaKeeper(self.ctx)
        self.observation = Observation(self.ctx, self.pacing.released_at,
                                       self.gpu_health.want_health, self.memory,
                                       Wants(self.ctx, lambda: self.pacing.poll).arg)
        self.persistence = Persistence(self.ctx)
        self.launcher = Launcher(self.ctx, self.lock, self.persistence.persist, self.pacing)
        self.reconciler = Reconciler(self.ctx, self.gpu_health.note_fault, self.launcher.stops)
        self.stall = StallWatch(self.ctx, self.launcher.stops, self.reconciler.apply_verdict)
        self.early_stop = EarlyStop(self.ctx, self.launcher.stop_session)
        self.preempt = Preempter(self.ctx, self.launcher.stops, self.observation)
        self.observation.follow = self.early_stop.offsets
        self.leftovers = Leftovers(self.ctx, self.lock)
        self.commands = Commands(self.ctx, Door(
            lock=self.lock, wake=self.wake, stop_engine=self.request_stop,
            check_finished=self.check_finished, persist=self.persistence.persist,
            persist_if_unsaved=self.persist_if_unsaved, stop_session=self.launcher.stop_session,
            settle_launches=self.launcher.settle_host, stops=self.launcher.stops))
        self.harvest = Harvest(self.ctx, self.lock)
        self.unseen = UnseenWatch(self.ctx, self.early_stop.names_seen, self.harvest.collected,
                                  self.harvest.records, self.harvest.summary_table)
        self.persistence.summary_tail = self.unseen.summary_tail
        self.search = SearchTrials(self.ctx, self.harvest.metrics_pending)
        self.queue_eta.more = lambda: trials_to_come(self.search)  # they count in the ETA
        self.search_pruning = SearchPruning(self.ctx, self.search.studies, self.early_stop)
        # watch=False: only the periodic probe (today's polling scripts; the benchmarks' base)
        self.watchers = HostWatchers(hosts if watch else {}, self.pacing.on_watch_event)
        self.pacing.watchers = self.watchers
        self._closers: list[Closer] = []
        self._started = False
        self._summary_task: asyncio.Task[None] | None = None

    # ---- what front ends, tests and benchmarks read ----------------------------------------

    @property
    def manifest(self) -> Manifest:
        """The run's manifest, with the secrets handed over so far (`provide_secrets`)."""
        return self.ctx.manifest

    @property
    def project(self) -> str:
        return self.manifest.project

    @property
    def run_dir(self) -> RunDir:
        return self.ctx.run_dir

    @property
    def jobs(self) -> dict[str, JobState]:
        return self.ctx.ledger.jobs

    @property
    def paused(self) -> bool:
        return self.ctx.paused

    @property
    def token(self) -> str:
        return self.ctx.token

    @property
    def snapshots(self) -> dict[str, HostSnapshot]:
        return {name: r.snapshot for name, r in self.ctx.hosts.items() if r.snapshot}

    @property
    def probes_by_host(self) -> dict[str, int]:
        return {name: record.probes for name, record in self.ctx.hosts.items()}

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self, *, preflight: bool = True) -> None:
        """Take the run dir, load or create state, reconcile it with the manifest, preflight."""
        run_dir = self.ctx.run_dir
        new = run_dir.create()
        note = run_dir.acquire_lock()
        try:
            saved = run_dir.load_state()
            if saved is not None:
                self.persistence.restore(saved)
                await self.persistence.replay_launches(float(saved.get("updated") or 0.0))
            for job in self.ctx.ledger.reconcile(self.manifest):
                self.ctx.crash_guard.release(job.phase, f"{job.id}'s command changed")
            self.queue_eta.seed(self.jobs.values())
            for notice in start_notices(self.manifest, self.jobs.values(),
                                        self.ctx.ledger.specs, run_dir.path):
                self.ctx.bus.alert("warning", notice)
            run_dir.write_manifest(self.manifest.to_json())
            if note:
                self.ctx.bus.alert("info", note)
            self.persistence.persist()
            if preflight:
                await check_hosts(self.ctx)
                self.persistence.persist()
        except BaseException:
            run_dir.release_lock()
            if new:
                run_dir.remove_new()  # refused before anything ran: leave no run dir behind
            raise
        self._started = True
        if self.await_command > 0:
            self.ctx.awaiting_command_until = self.ctx.clock() + self.await_command
        self.harvest.start()

    def close_with(self, closer: Closer) -> None:
        """Something served beside it (its control socket), closed before the run dir's lock."""
        self._closers.append(closer)

    async def run(self) -> int:
        """Tick until stopped (or, with exit_when_done, until every job has finished).

        Every `poll` seconds a full tick probes every host. In between, a host's watcher
        reporting an exit or a released GPU (or a retry coming due) starts a tick that probes
        just the hosts concerned — a freed GPU gets its next job in well under a second."""
        if not self._started:
            await self.start()
        wake = self.pacing.wake_event
        try:
            while not self._stop.is_set():
                wake.clear()
                only = self.pacing.hosts_due()
                readings = self.pacing.take_watch_readings(only)
                if only is None or only or readings:
                    await ticks_side_by_side(self.tick, self.pacing, self._stop, only, readings)
                if self.finished and self.exit_when_done:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.pacing.next_wait()):
                        await wake.wait()
        finally:
            await self._shutdown()
        return self.exit_code if self.finished and self.exit_code is not None else 130

    async def stop(self) -> None:
        self.request_stop()

    def request_stop(self) -> None:
        """Stop after the current tick; jobs keep running in their sessions."""
        self._stop.set()
        self.pacing.wake()

    def wake(self) -> None:
        self.pacing.wake(full=True)

    async def _shutdown(self) -> None:
        await self.launcher.settle()
        await self.leftovers.settle()
        with contextlib.suppress(Exception):
            await self.watchers.close()
        with contextlib.suppress(Exception):
            await self.wait_summary()
        with contextlib.suppress(Exception):
            await self.harvest.close()
        with contextlib.suppress(Exception):
            self.persistence.persist()
        for closer in self._closers:
            with contextlib.suppress(Exception):
                await closer()
        await asyncio.gather(*(host.close() for host in self.hosts.values()),
                             return_exceptions=True)
        self.ctx.run_dir.release_lock()

    # ---- the tick --------------------------------------------------------------------------

    async def tick(self, only: set[str] | None = None, readings: Readings | None = None, *,
                   background_launches: bool = False) -> None:
        """Probe the hosts (all of them, or `only` these), judge what they hold, decide and
        launch. Jobs are judged only on hosts probed in this very tick, and launched there or
        on a GPU a watcher has just read as released (`readings`: host -> GPU -> MiB)."""
        async with self.lock:
            self.pacing.ticked(full=only is None)
            probed = set(self.hosts) if only is None else only & set(self.hosts)
            requests = {name: self.observation.request(name) for name in self.hosts
                        if name in probed}
            starting = frozenset(self.launcher.in_flight)
        # The probe runs without the lock: a GPU a watcher reads as released meanwhile gets
        # its next job from a light tick (see run) instead of waiting for every host's answer.
        results = await self.observation.probe(requests)
        async with self.lock:
            self.observation.apply(requests, results, probed)
            await self.reconciler.judge(probed, requests, starting)
            self.memory.observe(probed)  # after judging: an attempt that ended settles now
            self.memory_asks.refresh()
            await self.stall.check(probed)
            await self.early_stop.check(probed)
            self.unseen.check()
            self.leftovers.check(probed)
            self.gpu_health.check(probed)
            self.observation.apply_output_scan()
            self.reconciler.unblock_recovered()
            await self.search_pruning.check()  # a search's reports to Optuna, its pruner's say
            await self.search.step()  # trials that ended are told; new ones asked into free room
            drains = self.launcher.drains.gpus(probed, background_launches)
            decision = decide(self.manifest, list(self.jobs.values()),
                              self.observation.host_views(probed, readings or {}, drains),
                              now=self.ctx.clock(),
                              paused=self.ctx.paused or self.ctx.awaiting_command(),
                              preconditions=self.observation.precondition_results,
                              specs=self.ctx.ledger.specs,
                              limits=self.ctx.crash_guard.limits(self.jobs.values(),
                                                                 self.ctx.clock()),
                              memory=self.memory.plan())
            self.observation.precondition_results = {}
            self.observation.want_preconditions = set(decision.check_preconditions)
            self._apply_waiting(decision, whole_picture=only is None)
            self.preempt.check(decision)
            if decision.launches:
                self.pacing.launches_on_watch_reading += sum(1 for launch in decision.launches
                    if readings and launch.host in readings and launch.host not in probed)
                await self.launcher.launch(decision.launches, background=background_launches)
                self.observation.publish_gpu_views({x.host for x in decision.launches})
            if not self.ctx.awaiting_command():  # a finished queue: said after the command
                self.check_finished()
            self.queue_eta.publish(self.finished)
            self.persist_if_unsaved()
            self.watchers.sync(self._watch_requests())

    def _apply_waiting(self, decision: Decision, *, whole_picture: bool) -> None:
        """Blocked jobs, and why every other waiting job was not launched (a partial tick sees
        only some hosts: its reasons for waiting are not the whole story, so only a full tick
        records them)."""
        ledger = self.ctx.ledger
        for job_id, reason in decision.block.items():
            job = self.jobs[job_id]
            ledger.update(job, reason=reason)
            ledger.set_status(job, JobStatus.BLOCKED, failure_class=FailureClass.DEPENDENCY,
                              detail=reason)
        if not whole_picture:
            return
        stopped = self.ctx.stopped_hosts()
        unusable = "; ".join(f"{host}: {why}" for host, why in stopped.items())
        shared = decision.shared_reason()
        if unusable and "free GPU" in shared:
            shared = f"{shared} (not launching on {unusable})"
        if shared != self.ctx.waiting_reason:
            self.ctx.waiting_reason = shared
            self.ctx.bus.publish(QueueWaiting(project=self.project, at=self.ctx.clock(),
                                              reason=shared))
        for job in self.jobs.values():
            why = decision.why_waiting(job)
            if why is None:
                continue
            if unusable and "free GPU" in why:
                why = f"{why} (not launching on {unusable})"
            # the queue's own reason is kept once (snapshot, state file), not in every record:
            # it changes as GPUs free and fill, and 10,000 records rewritten each time would
            # make every tick a whole-state write
            if ledger.update(job, reason=None if why == shared else why):
                ledger.changed(job)

    def _watch_requests(self) -> dict[str, WatchRequest]:
        """Per host: the attempts whose exit we wait for (their GPUs after it, if no drain wait
        reads them) and the GPUs whose memory we wait to see go, while a job could use them."""
        due = not self.ctx.paused and self.ctx.ledger.any_job_due(self.ctx.clock())
        follow = {h for h in self.hosts if due and self.launcher.drains.watch_after_exit(h)}
        attempts = {host: [WatchedAttempt(ref.key, ref.attempt_dir, tuple(self.jobs[ref.key].gpus)
                                          if host in follow else ())
                           for ref in refs if ref.key in self.jobs]
                    for host, refs in self.ctx.ledger.attempts_by_host().items()}
        draining = self.pacing.draining() if due else {}
        return {host: WatchRequest(attempts=tuple(attempts.get(host, ())),
                                   draining=tuple(sorted(draining.get(host, ()))),
                                   threshold_mib=self.manifest.gpu_free_threshold_mib)
                for host in self.hosts}

    def persist_if_unsaved(self) -> None:
        if self.persistence.due():
            self.persistence.persist()

    # ---- finishing -------------------------------------------------------------------------

    def check_finished(self) -> None:
        done = self.ctx.ledger.all_finished() and self.search.done()
        if done and not self.finished:
            jobs = list(self.jobs.values())
            self.finished = True
            self.exit_code = 0 if all(job.status in (JobStatus.COMPLETED, JobStatus.PRUNED)
                                      for job in jobs) else 1
            self.finished_at = last_end(jobs, self.ctx.clock())
            self._summary_task = asyncio.ensure_future(self.persistence.write_summary())
            self.ctx.bus.publish(QueueFinished(project=self.project, at=self.ctx.clock(),
                                               counts=status_counts(jobs), exit_code=self.exit_code,
                                               finished_at=self.finished_at))
        elif not done and self.finished:
            self.finished = False
            self.exit_code = None
            self.finished_at = None
            self.ctx.bus.publish(QueueReopened(project=self.project, at=self.ctx.clock()))
        self.persistence.finished = self.finished

    async def wait_summary(self) -> None:
        if self._summary_task is not None:
            await self._summary_task

    # ---- the front-end contract ------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[Event]:
        return self.ctx.bus.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self.ctx.bus.unsubscribe(queue)

    async def command(self, name: str, job_ids: list[str] | None = None,
                      args: dict[str, Any] | None = None,
                      command_id: str | None = None) -> CommandResult:
        return await self.commands.run(name, job_ids, args, command_id)

    async def send(self, command: Command, command_id: str | None = None) -> CommandResult:
        return await self.commands.send(command, command_id)

    async def provide_secrets(self, values: dict[str, str], project: str) -> SecretsAnswer:
        """Secrets it lacks, handed over its control socket: kept in memory only; the jobs
        waiting for them launch at the next tick."""
        return await self.commands.take_secrets(values, project)

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        job = self.jobs.get(job_id)
        if job is None or not job.history:
            return []
        chosen = job.current if attempt is None else next(
            (a for a in job.history if a.n == attempt), None)
        if chosen is None or chosen.host not in self.hosts:
            return []
        try:
            return await self.hosts[chosen.host].tail(chosen.attempt_dir, lines)
        except HostError as exc:
            return [f"[eq-tui] log unavailable: {exc}"]

    def snapshot(self) -> Snapshot:
        ctx = self.ctx
        now = ctx.clock()
        holders = ctx.ledger.held_gpus()
        hosts = []
        for name, record in ctx.hosts.items():
            snap = record.snapshot
            views = self.observation.gpu_views(name, snap, holders, now) if snap else []
            hosts.append({"name": name, "kind": record.kind, **record.link.to_json(),
                          "stopped": record.stopped, "gpus": views, "nodes": node_views(snap),
                          "drained": record.cordon_json()})
        manifest = self.manifest
        goals, group_over = results_settings(manifest)
        return {
            "project": self.project, "run_dir": str(ctx.run_dir.path), "paused": ctx.paused,
            "started_at": ctx.started_at, "created": ctx.created, "now": now,
            "finished": self.finished, "finished_at": self.finished_at,
            "eta_s": self.queue_eta.eta_s, "eta_at": self.queue_eta.eta_at,
            "exit_code": self.exit_code,
            "settings": {"max_attempts": manifest.oom_retry.max_attempts,
                         "oom_delay": manifest.oom_retry.delay,
                         "threshold_mib": manifest.gpu_free_threshold_mib,
                         "waves": manifest.waves, "poll": self.pacing.poll, "pid": os.getpid(),
                         "goals": goals, "group_over": group_over,
                         # each phase's own, for the front ends' `slow` (present/pace.py)
                         "phase_group_over": {phase.name: phase.results.group_over
                                              for phase in manifest.phases}},
            "jobs": [job.to_json() for job in self.jobs.values()],  # type: ignore[misc]
            "hosts": hosts,  # type: ignore[typeddict-item]
            "alerts": list(ctx.bus.alerts),
            "held_phases": dict(ctx.crash_guard.held),
            "waiting_reason": ctx.waiting_reason,
        }
