"""The engine: probe hosts → judge running jobs → decide → launch → persist → publish.

It is the only writer of run state. Front ends use it through the EngineClient interface
(snapshot, events, commands, tail); it never imports a UI toolkit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from eq_tui.engine.control import ControlServer
from eq_tui.engine.events import (
    Alert,
    Event,
    Fanout,
    HostProbed,
    HostStateChanged,
    JobStateChanged,
    JobUpdated,
    PreflightReported,
    QueueFinished,
    QueuePaused,
)
from eq_tui.engine.gpu_view import gpu_views, node_views
from eq_tui.engine.judge import (
    Exited,
    Lost,
    NeverStarted,
    Running,
    Verdict,
    observe,
    verdict_for_exit,
    verdict_for_lost,
)
from eq_tui.engine.launchvars import substitute
from eq_tui.engine.model import (
    ACTIVE,
    FINISHED,
    Attempt,
    Failure,
    FailureClass,
    JobState,
    JobStatus,
)
from eq_tui.engine.naming import attempt_dir, new_run_token, session_name
from eq_tui.engine.scheduler import (
    GpuView,
    HostView,
    decide,
    free_gpus,
    phase_gates,
)
from eq_tui.engine.store import STATE_VERSION, RunDir
from eq_tui.engine.summary import render_summary, status_counts
from eq_tui.engine.watchers import HostWatchers
from eq_tui.errors import HostError, RunDirError
from eq_tui.hosts.base import (
    AttemptRef,
    Host,
    HostSnapshot,
    LaunchRequest,
    PathCheck,
    PreflightRequest,
    ProbeRequest,
)
from eq_tui.hosts.logclean import clean_text
from eq_tui.hosts.watch import WatchedAttempt, WatchEvent, WatchRequest
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest

LAUNCH_GRACE_S = 45.0  # a `launching` attempt with no trace after this long never started
MAX_LAUNCH_FAILURES = 3
HURRY_POLL_S = 0.25  # tick interval while a released GPU drains (memory release is not polled)
HURRY_WINDOW_S = 10.0
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+")
MAX_ALERTS = 200
PERSISTED_EVENTS = (JobStateChanged, HostStateChanged, Alert, QueuePaused, QueueFinished,
                    PreflightReported)


def _shell_path(path: str) -> str:
    """A path for command text: bare when it needs no quoting (it may sit inside quotes the
    manifest's args rendering added), quoted otherwise."""
    return path if _SAFE_PATH.fullmatch(path) else shlex.quote(path)


class Engine:
    """One project's queue. `start()`, then `run()` until it returns an exit code."""

    def __init__(self, manifest: Manifest, run_dir: Path, hosts: dict[str, Host], *,
                 poll: float = 2.0, clock: Callable[[], float] = time.time,
                 exit_when_done: bool = False, control_socket: bool = True,
                 watch: bool = True) -> None:
        self.manifest = manifest
        self.project = manifest.project
        self.run_dir = RunDir(Path(run_dir))
        self.hosts = hosts
        self.poll = poll
        self.clock = clock
        self.exit_when_done = exit_when_done
        self.token = new_run_token()
        self.created = clock()
        self.started_at = clock()
        self.paused = False
        self.finished = False
        self.exit_code: int | None = None
        self.jobs: dict[str, JobState] = {}
        self.retired: list[dict[str, Any]] = []  # jobs removed from the manifest, kept for history
        self.quarantine: dict[str, set[int]] = {}
        self.stopped_hosts: dict[str, str] = {}
        self.alerts: list[dict[str, Any]] = []
        self.snapshots: dict[str, HostSnapshot] = {}
        self.host_state: dict[str, dict[str, Any]] = {
            name: {"state": "connecting", "reason": "", "since": self.started_at, "rtt_s": None}
            for name in hosts}
        self._specs: dict[str, JobSpec] = {spec.id: spec for spec in manifest.jobs}
        self._host_specs: dict[str, HostSpec] = {spec.name: spec for spec in manifest.hosts}
        self._log_roots: dict[str, str] = {}
        self._released_at: dict[tuple[str, int], float] = {}
        self._output_scanned: set[str] = set()
        self._precondition_results: dict[str, bool] = {}
        self._want_preconditions: set[str] = set()
        self._subscribers = Fanout()
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._dirty = False
        self._changed: dict[str, None] = {}  # jobs changed since the last write, in order
        self._jobs_version = 0  # counts job changes; what is built from the jobs keys on it
        self._attempts_cache: tuple[tuple[int, int, int], dict[str, list[AttemptRef]]] | None \
            = None
        self._output_checks_cache: tuple[tuple[int, int, int], list[PathCheck]] | None = None
        self._persisted_whole = False
        self._finish_persisted = False
        self._started = False
        self._finish_reported = False
        self._summary_task: asyncio.Task[None] | None = None
        self.ticks = 0
        self.full_ticks = 0
        self.watch_wakeups = 0
        self.launches_on_watch_reading = 0
        self.probes_by_host: dict[str, int] = dict.fromkeys(hosts, 0)
        self._hurry_until = 0.0
        self._full_due = True
        self._last_full_tick = 0.0
        self._due_hosts: set[str] = set()
        self._launch_tasks: set[asyncio.Task[None]] = set()
        # sessions whose background launch has not returned yet: a probe asked meanwhile may
        # look before the session exists, so its "nothing there" proves nothing
        self._launches_in_flight: set[str] = set()
        self._watch_readings: dict[str, dict[int, int]] = {}  # host -> gpu -> MiB used
        self._watch_seen_free: dict[tuple[str, int], float] = {}
        # watch=False leaves only the periodic probe (how today's polling scripts work: the
        # benchmarks compare against it)
        self.watchers = HostWatchers(hosts if watch else {}, self._on_watch_event)
        self.control: ControlServer | None = (
            ControlServer(self, self.run_dir.path) if control_socket else None)

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self, *, preflight: bool = True) -> None:
        """Take the run dir, load or create state, reconcile it with the manifest, preflight."""
        self.run_dir.create()
        note = self.run_dir.acquire_lock()
        try:
            saved = self.run_dir.load_state()
            if saved is not None:
                self._restore(saved)
                await self._replay_launches(float(saved.get("updated") or 0.0))
            self._reconcile_manifest()
            self.run_dir.write_manifest(self.manifest.to_json())
            if note:
                self._alert("info", note)
            self._persist()
            if preflight:
                await self._preflight()
            if self.control is not None:
                await self.control.start()
        except BaseException:
            self.run_dir.release_lock()
            raise
        self._started = True

    async def run(self) -> int:
        """Tick until stopped (or, with exit_when_done, until every job has finished).

        Every `poll` seconds a full tick probes every host. In between, a host's watcher
        reporting an exit or a released GPU (or a retry coming due) starts a tick that probes
        just the hosts concerned — a freed GPU gets its next job in well under a second."""
        if not self._started:
            await self.start()
        try:
            while not self._stop.is_set():
                self._wake.clear()
                only = self._hosts_due()
                readings = self._take_watch_readings(only)
                if only is None or only or readings:
                    await self._tick_serving_releases(only, readings)
                if self.finished and self.exit_when_done:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._next_wait()):
                        await self._wake.wait()
        finally:
            await self._shutdown()
        return self.exit_code if self.finished and self.exit_code is not None else 130

    async def _tick_serving_releases(self, only: set[str] | None,
                                     readings: dict[str, dict[int, int]]) -> None:
        """A tick; while its probes are out (a full tick over many hosts takes a while), a GPU
        a watcher reads as released gets its next job at once from a light tick that probes
        nothing and launches only on that reading."""
        tick = asyncio.create_task(self.tick(only=only, readings=readings,
                                             background_launches=True))
        try:
            while not tick.done():
                woken = asyncio.create_task(self._wake.wait())
                try:
                    await asyncio.wait({tick, woken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    woken.cancel()
                if tick.done() or self._stop.is_set():
                    break
                self._wake.clear()
                released = self._take_watch_readings(set())
                if released:
                    await self.tick(only=set(), readings=released, background_launches=True)
            await tick
        finally:
            if not tick.done():
                tick.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await tick
        if self._due_hosts or self._watch_readings:
            self._wake.set()  # woken meanwhile for an exit: the next tick probes that host

    def _hosts_due(self) -> set[str] | None:
        """The hosts the next tick probes: None for all of them (a full tick)."""
        now = time.monotonic()
        if self._full_due or now - self._last_full_tick >= self.poll * 0.95:
            self._full_due = False
            self._due_hosts.clear()
            return None
        due = set(self._due_hosts)
        self._due_hosts.clear()
        if self.paused or not self._any_job_due():
            return due
        due |= self._hurry_hosts()
        # a job that came due (an OOM retry's delay is up) may fit a GPU that already
        # looked free: probe that host again before launching there
        due |= self._hosts_with_free_gpus()
        return due

    def _take_watch_readings(self, probed: set[str] | None) -> dict[str, dict[int, int]]:
        """GPU releases a watcher read on hosts this tick does not probe: the tick may launch
        on those GPUs on the strength of that reading (fresher than any probe would be)."""
        readings = {host: gpus for host, gpus in self._watch_readings.items()
                    if probed is not None and host not in probed}
        self._watch_readings = {}
        return readings if not self.paused else {}

    def _any_job_due(self) -> bool:
        now = self.clock()
        for job in self.jobs.values():
            if job.status == JobStatus.PENDING and (job.retry_at is None or job.retry_at <= now):
                return True
            if job.status == JobStatus.FAILED_OOM and job.retry_at is not None \
                    and job.retry_at <= now:
                return True
        return False

    def _held_gpus(self) -> dict[tuple[str, int], str]:
        """(host, gpu) -> job id for every GPU a job of ours holds (from the attempt index)."""
        return {(host, gpu): ref.key for host, refs in self._attempts_by_host().items()
                for ref in refs if ref.key in self.jobs for gpu in self.jobs[ref.key].gpus}

    def _draining(self) -> dict[str, list[int]]:
        """GPUs we released recently whose last reading still shows their memory in use."""
        now = self.clock()
        threshold = self.manifest.gpu_free_threshold_mib
        draining: dict[str, list[int]] = {}
        holders = self._held_gpus()
        for (host, gpu), released in self._released_at.items():
            if now - released > HURRY_WINDOW_S or (host, gpu) in holders:
                continue
            seen = self._watch_seen_free.get((host, gpu))
            if seen is not None and seen >= released:
                continue  # a watcher read it below the threshold since
            snap = self.snapshots.get(host)
            reading = next((g for g in snap.gpus if g.index == gpu), None) if snap else None
            if (reading is None or snap is None or snap.taken_at < released
                    or reading.memory_used_mib is None
                    or reading.memory_used_mib >= threshold):
                draining.setdefault(host, []).append(gpu)
        return draining

    def _hurry_hosts(self) -> set[str]:
        """Hosts with a draining GPU whose release no watcher will report: probed quickly."""
        return {host for host in self._draining() if not self.watchers.covers_gpus(host)}

    def _hosts_with_free_gpus(self) -> set[str]:
        holders = self._held_gpus()
        threshold = self.manifest.gpu_free_threshold_mib
        return {view.name for view in self._host_views(None)
                if free_gpus(view, holders, threshold)}

    def _next_wait(self) -> float:
        """Seconds to the next tick: the rest of the poll interval; less while a GPU we just
        released drains with no watcher to report it, or when an OOM retry comes due."""
        wait = max(0.0, self._last_full_tick + self.poll - time.monotonic())
        if self.paused:
            return wait
        now = self.clock()
        if self.clock() < self._hurry_until and self._hurry_hosts() and self._any_job_due():
            wait = min(wait, HURRY_POLL_S)
        retries = [job.retry_at for job in self.jobs.values()
                   if job.status == JobStatus.FAILED_OOM and job.retry_at is not None
                   and job.retry_at > now]
        if retries:
            wait = min(wait, max(0.0, min(retries) - now) + 0.01)
        return wait

    def _on_watch_event(self, host: str, event: WatchEvent) -> None:
        if event.kind == "exited":
            self._due_hosts.add(host)  # judging an exit needs the probe (exit code, output)
            self.watch_wakeups += 1
            self._wake.set()
        elif event.kind == "released" and event.gpu is not None and event.used_mib is not None:
            self._watch_readings.setdefault(host, {})[event.gpu] = event.used_mib
            self._watch_seen_free[(host, event.gpu)] = self.clock()
            self.watch_wakeups += 1
            self._wake.set()
        elif event.kind == "error":
            self._alert("warning", f"{host}: watcher: {event.detail}", host=host)

    async def stop(self) -> None:
        self.request_stop()

    def request_stop(self) -> None:
        """Stop after the current tick; jobs keep running in their sessions."""
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        self._full_due = True
        self._wake.set()

    async def _shutdown(self) -> None:
        if self._launch_tasks:  # sessions being started: record how each launch ended
            await asyncio.gather(*self._launch_tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.watchers.close()
        with contextlib.suppress(Exception):
            await self.wait_summary()
        with contextlib.suppress(Exception):
            self._persist()
        if self.control is not None:
            await self.control.close()
        await asyncio.gather(*(host.close() for host in self.hosts.values()),
                             return_exceptions=True)
        self.run_dir.release_lock()

    # ---- state file ------------------------------------------------------------------------

    def _restore(self, saved: dict[str, Any]) -> None:
        self.token = str(saved.get("token") or self.token)
        self.created = float(saved.get("created") or self.created)
        self.paused = bool(saved.get("paused", False))
        self.quarantine = {h: set(g) for h, g in (saved.get("quarantine") or {}).items()}
        self.stopped_hosts = dict(saved.get("stopped_hosts") or {})
        self.retired = list(saved.get("retired") or [])
        for raw in saved.get("jobs", []):
            try:
                job = JobState.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                raise RunDirError(f"{self.run_dir.state_file}: a job record is unreadable "
                                  f"({exc!r}); fix or move the file") from None
            self.jobs[job.id] = job

    async def _replay_launches(self, saved_at: float) -> None:
        """Launches the journal (events.jsonl) knows of but the loaded state does not — it was
        recovered from the previous copy — are restored as `launching` attempts, so the probe
        adopts or judges them and nothing is launched twice."""
        for event in self.run_dir.read_events(since=saved_at - 1.0):
            if event.get("type") != "job_state_changed" or event.get("new") != "launching":
                continue
            job = self.jobs.get(str(event.get("job")))
            host = event.get("host")
            n = int(event.get("attempt") or 0)
            if job is None or host not in self.hosts or n <= len(job.history):
                continue
            try:
                root = await self.hosts[host].log_root(self.project, self.token)
            except HostError:
                root = None
            if root is None:
                continue
            directory = attempt_dir(root, job.id, n)
            job.history.append(Attempt(
                n=n, host=host, gpus=list(event.get("gpus") or []),
                session=session_name(self.project, self.token, job.id, n),
                attempt_dir=directory, log=f"{directory}/log",
                decided_at=float(event.get("at") or 0.0)))
            job.attempts += 1
            job.host, job.gpus = host, list(event.get("gpus") or [])
            job.log = f"{directory}/log"
            job.status = JobStatus.LAUNCHING
            self._alert("warning", f"{job.id}: attempt {n} on {host} was missing from the "
                        "state file; restored from the event journal", host=host, job=job.id)

    def _state_fields(self) -> dict[str, Any]:
        """The state file's top-level fields: all but the jobs."""
        return {
            "version": STATE_VERSION,
            "project": self.project,
            "token": self.token,
            "created": self.created,
            "updated": self.clock(),
            "paused": self.paused,
            "quarantine": {h: sorted(g) for h, g in self.quarantine.items() if g},
            "stopped_hosts": self.stopped_hosts,
            "retired": self.retired,
        }

    def state_json(self) -> dict[str, Any]:
        return {**self._state_fields(), "jobs": [job.to_json() for job in self.jobs.values()]}

    @property
    def _dirty(self) -> bool:
        """Something to write: a change not on disk yet, or journal lines old enough that
        queue_state.json should take them in (so it stays current while nothing changes)."""
        return self._unsaved or self.run_dir.state.compaction_due()

    @_dirty.setter
    def _dirty(self, value: bool) -> None:
        self._unsaved = value

    def _persist(self, *, whole: bool = False) -> None:
        """Write the state: whole the first time and when the queue finishes; otherwise the
        top-level fields and the records of the jobs that changed (the store journals them
        when the state is large). Jobs are serialised now, not when they changed, so every
        change made since is in."""
        at_finish = self.finished and not self._finish_persisted
        if whole or at_finish or not self._persisted_whole:
            self.run_dir.save_state(self.state_json())
            self._persisted_whole = True
        else:
            self.run_dir.save_changes(self._state_fields(), [
                self.jobs[job_id].to_json() for job_id in self._changed if job_id in self.jobs])
        self._finish_persisted = self.finished
        self._changed.clear()
        self._dirty = False

    def _reconcile_manifest(self) -> None:
        """New jobs are added, changed commands of unfinished jobs take effect next attempt,
        jobs gone from the manifest are retired unless still running."""
        ordered: dict[str, JobState] = {}
        for spec in self.manifest.jobs:
            job = self.jobs.pop(spec.id, None)
            if job is None:
                job = JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd)
            else:
                if job.cmd != spec.cmd and job.status != JobStatus.COMPLETED:
                    self._alert("info", f"{spec.id}: command changed; the next attempt uses "
                                f"`{spec.cmd}` (was `{job.cmd}`)", job=spec.id)
                    job.cmd = spec.cmd
                job.phase = spec.phase
            ordered[spec.id] = job
        for job in self.jobs.values():
            if job.status in ACTIVE:
                self._alert("warning", f"{job.id} is no longer in the manifest; it keeps "
                            "running and is watched until it ends", job=job.id)
                ordered[job.id] = job
            else:
                self.retired.append(job.to_json())
        self.jobs = ordered

    # ---- events ----------------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[Event]:
        return self._subscribers.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self._subscribers.unsubscribe(queue)

    def _publish(self, event: Event) -> None:
        if isinstance(event, PERSISTED_EVENTS):
            self.run_dir.append_event(event.to_json())
        self._subscribers.publish(event)

    def _alert(self, level: str, message: str, *, host: str | None = None,
               job: str | None = None) -> None:
        event = Alert(project=self.project, at=self.clock(), level=level, message=message,
                      host=host, job=job)
        self.alerts.append(event.to_json())
        del self.alerts[:-MAX_ALERTS]
        self._publish(event)

    def _job_changed(self, job: JobState) -> None:
        """Every change to a job ends here: it is what gets the job written to disk."""
        self._dirty = True
        self._changed[job.id] = None
        self._jobs_version += 1
        self._publish(JobUpdated(project=self.project, at=self.clock(), job=job.id,
                                 state=job.to_json()))

    def _set_status(self, job: JobState, new: JobStatus, *, failure_class: str | None = None,
                    detail: str = "") -> None:
        old = job.status
        now = self.clock()
        if old in ACTIVE and new not in ACTIVE and job.host is not None:
            for gpu in job.gpus:
                self._released_at[(job.host, gpu)] = now
            self._hurry_until = now + HURRY_WINDOW_S
        job.status = new
        if new in FINISHED:
            job.ended = now
        if new == JobStatus.COMPLETED:
            job.failure = None
            job.reason = None
        if failure_class is not None:
            job.failure = Failure(failure_class, detail)
        current = job.current
        self._publish(JobStateChanged(
            project=self.project, at=now, job=job.id, old=str(old), new=str(new),
            host=job.host, gpus=tuple(job.gpus), attempt=current.n if current else 0,
            failure_class=failure_class, detail=detail))
        self._job_changed(job)

    # ---- the tick --------------------------------------------------------------------------

    async def tick(self, only: set[str] | None = None,
                   readings: dict[str, dict[int, int]] | None = None, *,
                   background_launches: bool = False) -> None:
        """Probe the hosts (all of them, or `only` these), judge what they hold, decide and
        launch. Jobs are judged only on hosts probed in this very tick, and launched there or
        on a GPU a watcher has just read as released (`readings`: host -> GPU -> MiB)."""
        async with self._lock:
            self.ticks += 1
            if only is None:
                self.full_ticks += 1
                self._last_full_tick = time.monotonic()
            probed = set(self.hosts) if only is None else only & set(self.hosts)
            requests = {name: self._probe_request(name) for name in self.hosts
                        if name in probed}
            starting = frozenset(self._launches_in_flight)
        # The probe runs without the lock: a GPU a watcher reads as released meanwhile gets
        # its next job from a light tick (see run) instead of waiting for every host's answer.
        results = await self._probe_hosts(requests)
        async with self._lock:
            self._apply_probes(requests, results)
            await self._judge_active(probed, requests, starting)
            self._apply_output_scan()
            self._unblock_recovered()
            decision = decide(self.manifest, list(self.jobs.values()),
                              self._host_views(probed, readings or {}), now=self.clock(),
                              paused=self.paused,
                              preconditions=self._precondition_results)
            self._precondition_results = {}
            self._want_preconditions = set(decision.check_preconditions)
            for job_id, reason in decision.block.items():
                job = self.jobs[job_id]
                job.reason = reason
                self._set_status(job, JobStatus.BLOCKED, failure_class=FailureClass.DEPENDENCY,
                                 detail=reason)
            unusable = "; ".join(f"{host}: {why}" for host, why in self.stopped_hosts.items())
            # a partial tick sees only some hosts: its reasons for waiting are not the whole story
            for job_id, reason in decision.waiting.items() if only is None else ():
                if unusable and "free GPU" in reason:
                    reason = f"{reason} (not launching on {unusable})"
                job = self.jobs[job_id]
                if job.reason != reason:
                    job.reason = reason
                    self._job_changed(job)
            if decision.launches:
                self.launches_on_watch_reading += sum(
                    1 for launch in decision.launches
                    if readings and launch.host in readings and launch.host not in probed)
                await self._launch(decision.launches, background=background_launches)
                self._publish_gpu_views({launch.host for launch in decision.launches})
            self._check_finished()
            if self._dirty:
                self._persist()
            self.watchers.sync(self._watch_requests())

    def _watch_requests(self) -> dict[str, WatchRequest]:
        """Per host: the attempts whose exit we wait for and the GPUs whose memory we wait to
        see released (only worth watching while a job could use them)."""
        attempts = {host: [WatchedAttempt(ref.key, ref.attempt_dir,
                                          tuple(self.jobs[ref.key].gpus))
                           for ref in refs if ref.key in self.jobs]
                    for host, refs in self._attempts_by_host().items()}
        draining = self._draining() if not self.paused and self._any_job_due() else {}
        threshold = self.manifest.gpu_free_threshold_mib
        return {host: WatchRequest(attempts=tuple(attempts.get(host, ())),
                                   draining=tuple(sorted(draining.get(host, ()))),
                                   threshold_mib=threshold)
                for host in self.hosts}

    def _cwd_for(self, host: str) -> str | None:
        if self.manifest.cwd:
            return self.manifest.cwd
        spec = self._host_specs.get(host)
        if spec is not None and spec.kind in ("local", "sim"):
            return str(Path(self.manifest.source).resolve().parent)
        return None

    def _run_dir_value(self) -> str:
        return str(self.run_dir.path.resolve())

    def _output_pattern(self, spec: JobSpec) -> str | None:
        if not spec.output_check:
            return None
        return substitute(spec.output_check, run_dir=self._run_dir_value(), job_id=spec.id)

    def _jobs_key(self) -> tuple[int, int, int]:
        return (self._jobs_version, id(self.jobs), len(self.jobs))

    def _attempts_by_host(self) -> dict[str, list[AttemptRef]]:
        """The attempts each host's probe asks about: one pass over the jobs per change of
        them (not one per host per tick)."""
        key = self._jobs_key()
        if self._attempts_cache is None or self._attempts_cache[0] != key:
            by_host: dict[str, list[AttemptRef]] = {}
            for job in self.jobs.values():
                if job.status not in ACTIVE or job.host is None:
                    continue
                current = job.current
                if current is None:
                    continue
                spec = self._specs.get(job.id)
                by_host.setdefault(job.host, []).append(AttemptRef(
                    key=job.id, session=current.session, attempt_dir=current.attempt_dir,
                    output_check=self._output_pattern(spec) if spec else None))
            self._attempts_cache = (key, by_host)
        return self._attempts_cache[1]

    def _pending_output_checks(self) -> list[PathCheck]:
        key = self._jobs_key()
        if self._output_checks_cache is None or self._output_checks_cache[0] != key:
            checks = []
            for job in self.jobs.values():
                if job.status not in (JobStatus.PENDING, JobStatus.FAILED_OOM):
                    continue
                spec = self._specs.get(job.id)
                pattern = self._output_pattern(spec) if spec else None
                if pattern:
                    checks.append(PathCheck(job.id, pattern))
            self._output_checks_cache = (key, checks)
        return self._output_checks_cache[1]

    def _probe_request(self, host: str) -> ProbeRequest:
        attempts = self._attempts_by_host().get(host, [])
        # once per host (the first probe): are pending jobs' outputs there already?
        output_checks = [] if host in self._output_scanned else self._pending_output_checks()
        preconditions = []
        for job_id in sorted(self._want_preconditions):
            spec = self._specs.get(job_id)
            if spec is None:
                continue
            for i, pre in enumerate(spec.preconditions):
                pattern = substitute(pre.path, run_dir=self._run_dir_value(), job_id=job_id)
                preconditions.append(PathCheck(f"{job_id}#{i}", pattern))
        return ProbeRequest(attempts=tuple(attempts), output_checks=tuple(output_checks),
                            preconditions=tuple(preconditions), cwd=self._cwd_for(host))

    async def _probe_one(self, name: str, host: Host, request: ProbeRequest) -> HostSnapshot:
        try:
            return await host.probe(request)
        except HostError as exc:
            return HostSnapshot(host=name, ok=False, taken_at=self.clock(), error=str(exc))
        except Exception as exc:  # a host bug must not stop the other hosts
            return HostSnapshot(host=name, ok=False, taken_at=self.clock(),
                                error=f"probe failed: {exc!r}")

    async def _probe_hosts(self, requests: dict[str, ProbeRequest]) -> list[HostSnapshot]:
        for name in requests:
            self.probes_by_host[name] += 1
        return await asyncio.gather(*(self._probe_one(name, self.hosts[name], request)
                                      for name, request in requests.items()))

    def _apply_probes(self, requests: dict[str, ProbeRequest],
                      results: list[HostSnapshot]) -> None:
        names = list(requests)
        precondition_parts: dict[str, list[bool]] = {}
        now = self.clock()
        holders = self._held_gpus()
        for name, snap in zip(names, results, strict=True):
            self.snapshots[name] = snap
            self._update_link(name, snap)
            if snap.ok:
                for key, ok in snap.preconditions.items():
                    precondition_parts.setdefault(key.split("#", 1)[0], []).append(ok)
            views = self._gpu_views(name, snap, holders, now)
            self._publish(HostProbed(project=self.project, at=now, host=name, ok=snap.ok,
                                     rtt_s=snap.rtt_s, gpus=tuple(views), error=snap.error,
                                     warnings=snap.warnings, nodes=tuple(node_views(snap))))
        # A job with several preconditions is ready only when every one matched (on any host).
        for job_id, job_spec in self._specs.items():
            if (job_id in self._want_preconditions and job_spec.preconditions
                    and job_id in precondition_parts):
                self._precondition_results[job_id] = self._all_preconditions_met(
                    job_id, len(job_spec.preconditions), results)

    @staticmethod
    def _all_preconditions_met(job_id: str, count: int, snaps: Iterable[HostSnapshot]) -> bool:
        met = [False] * count
        for snap in snaps:
            if not snap.ok:
                continue
            for i in range(count):
                if snap.preconditions.get(f"{job_id}#{i}"):
                    met[i] = True
        return all(met)

    def _gpu_views(self, name: str, snap: HostSnapshot, holders: dict[tuple[str, int], str],
                   now: float) -> list[dict[str, Any]]:
        spec = self._host_specs.get(name)
        return gpu_views(name, snap.gpus,
                         allowed=frozenset(spec.gpus) if spec and spec.gpus is not None else None,
                         holders=holders, released_at=self._released_at,
                         quarantined=frozenset(self.quarantine.get(name, ())),
                         threshold_mib=self.manifest.gpu_free_threshold_mib, now=now)

    def _publish_gpu_views(self, names: set[str]) -> None:
        """The grid's view right after launches: the new jobs on their GPUs, no new probe."""
        now = self.clock()
        holders = self._held_gpus()
        for name in names:
            snap = self.snapshots.get(name)
            if snap is None or not snap.ok:
                continue
            views = self._gpu_views(name, snap, holders, now)
            self._publish(HostProbed(project=self.project, at=now, host=name, ok=True,
                                     rtt_s=snap.rtt_s, gpus=tuple(views),
                                     warnings=snap.warnings, nodes=tuple(node_views(snap))))

    def _update_link(self, name: str, snap: HostSnapshot) -> None:
        state = self.host_state[name]
        new_state = "up" if snap.ok else "down"
        state["rtt_s"] = snap.rtt_s if snap.ok else None
        for warning in snap.warnings:
            if warning not in state.setdefault("warnings", []):
                self._alert("warning", f"{name}: {warning}", host=name)
        state["warnings"] = list(snap.warnings)
        if state["state"] != new_state:
            state["state"] = new_state
            state["since"] = snap.taken_at
            state["reason"] = snap.error or ""
            self._publish(HostStateChanged(project=self.project, at=self.clock(), host=name,
                                           state=new_state, reason=snap.error or ""))
            if new_state == "down":
                self._alert("error", f"{name} is down: {snap.error}", host=name)

    def _host_views(self, probed: set[str] | None,
                    readings: dict[str, dict[int, int]] | None = None) -> list[HostView]:
        """What decide() may use. With `probed`, a host not probed this tick takes no launch,
        except on the GPUs in `readings` (a watcher's fresh reading; its others count as
        unknown)."""
        views = []
        for name in self.hosts:
            snap = self.snapshots.get(name)
            spec = self._host_specs.get(name)
            fresh = (readings or {}).get(name)
            usable = (snap is not None and snap.ok and name not in self.stopped_hosts
                      and (probed is None or name in probed or fresh is not None))
            if snap is None:
                gpus: tuple[GpuView, ...] = ()
            elif probed is None or name in probed or fresh is None:
                gpus = tuple(GpuView(g.index, g.memory_used_mib) for g in snap.gpus)
            else:
                gpus = tuple(GpuView(g.index, fresh.get(g.index)) for g in snap.gpus)
            views.append(HostView(
                name=name, usable=usable, gpus=gpus,
                allowed=frozenset(spec.gpus) if spec and spec.gpus is not None else None,
                max_parallel=spec.max_parallel if spec else 8,
                quarantined=frozenset(self.quarantine.get(name, ()))))
        return views

    # ---- judging running jobs --------------------------------------------------------------

    async def _judge_active(self, probed: set[str], requests: dict[str, ProbeRequest],
                            starting: frozenset[str]) -> None:
        """`starting`: sessions whose launch had not returned when these probes were asked."""
        now = self.clock()
        stale_kills = []
        # only the probed hosts' attempts: another host's last snapshot was judged already
        attempts = self._attempts_by_host()
        asked = {(host, ref.key, ref.session) for host, request in requests.items()
                 for ref in request.attempts}
        for job in [self.jobs[ref.key] for host in self.hosts if host in probed
                    for ref in attempts.get(host, ()) if ref.key in self.jobs]:
            current = job.current
            if job.status not in ACTIVE or job.host is None or current is None:
                continue
            if (job.host, job.id, current.session) not in asked:
                continue  # launched (or relaunched) after this probe asked: the next one judges
            snap = self.snapshots.get(job.host)
            if snap is None or not snap.ok:
                continue  # host down: the job lives on in its session; judge it when back
            probe = snap.attempts.get(job.id)
            seen = observe(job, probe, now=now, stale_grace_s=self.manifest.stale_grace_s)
            if probe is not None and probe.last_line and probe.last_line != job.last_line:
                job.last_line = probe.last_line
                self._job_changed(job)
            if probe is not None and (probe.detail or None) != job.reason and not (
                    job.reason or "").startswith("launch"):
                job.reason = probe.detail or None
                self._job_changed(job)
            if current.session in starting and isinstance(seen, NeverStarted | Lost):
                continue  # this probe may have looked before the session was there
            if isinstance(seen, Running):
                self._note_running(job, seen, probe.started if probe else None)
            elif isinstance(seen, NeverStarted):
                if now - (current.decided_at or 0.0) >= LAUNCH_GRACE_S:
                    self._never_started(job, "the session never started")
            elif isinstance(seen, Lost):
                current.end = now
                verdict = verdict_for_lost(job)
                job.lost_requeues += 1
                self._apply_verdict(job, verdict)
            elif isinstance(seen, Exited):
                if seen.stale:
                    stale_kills.append((job, seen))
                else:
                    self._judge_exit(job, seen, probe.exited_at if probe else None)
        if stale_kills:
            await asyncio.gather(*(self._clean_stale(job, seen) for job, seen in stale_kills))

    def _note_running(self, job: JobState, seen: Running, started: float | None) -> None:
        current = job.current
        changed = job.exited_seen_at != seen.exited_seen_at
        job.exited_seen_at = seen.exited_seen_at
        if current is not None and started is not None and current.start != started:
            current.start = started
            job.started = started
            changed = True
        if job.status == JobStatus.LAUNCHING:
            self._set_status(job, JobStatus.RUNNING)
        elif changed:
            self._job_changed(job)

    def _never_started(self, job: JobState, why: str) -> None:
        current = job.current
        if current is not None:
            current.launched = False
            current.failure_class = FailureClass.LAUNCH_FAILED
        failures = sum(1 for a in job.history if not a.launched)
        job.attempts = max(0, job.attempts - 1)
        job.host, job.gpus = None, []
        if failures >= MAX_LAUNCH_FAILURES:
            job.reason = why
            self._set_status(job, JobStatus.STUCK, failure_class=FailureClass.LAUNCH_FAILED,
                             detail=f"{why} ({failures} tries)")
        else:
            job.reason = f"launch failed: {why}; trying again"
            self._set_status(job, JobStatus.PENDING)

    async def _clean_stale(self, job: JobState, seen: Exited) -> None:
        current = job.current
        assert current is not None and job.host is not None
        try:
            await self.hosts[job.host].kill(current.session, current.attempt_dir,
                                            self.manifest.launcher)
        except HostError as exc:
            self._alert("warning", f"{job.id}: could not clean its stale session: {exc}",
                        host=job.host, job=job.id)
            return
        self._alert("info", f"{job.id}: stale session {current.session} cleaned "
                    f"(process exited {seen.exit_code})", host=job.host, job=job.id)
        self._judge_exit(job, seen, None)

    def _judge_exit(self, job: JobState, seen: Exited, exited_at: float | None) -> None:
        current = job.current
        assert current is not None
        now = self.clock()
        spec = self._specs.get(job.id)
        verdict = verdict_for_exit(job, seen, self.manifest, now=now,
                                   has_output_check=bool(spec and spec.output_check))
        current.exit_code = seen.exit_code
        current.end = exited_at or now
        job.exited_seen_at = None
        final = [line for line in clean_text(seen.log_tail) if line.strip()]
        if final:
            job.last_line = final[-1][:300]
        self._apply_verdict(job, verdict)

    def _apply_verdict(self, job: JobState, verdict: Verdict) -> None:
        current = job.current
        if current is not None:
            current.failure_class = verdict.failure_class
        if verdict.failure_class is not None:
            cls = verdict.failure_class
            job.retries_by_class[cls] = job.retries_by_class.get(cls, 0) + 1
        job.retry_at = verdict.retry_at
        job.exited_seen_at = None
        if verdict.quarantine_gpus and job.host is not None:
            self.quarantine.setdefault(job.host, set()).update(job.gpus)
            self._alert("warning", f"{job.host}: GPU {job.gpus} quarantined after "
                        f"{verdict.detail}", host=job.host, job=job.id)
        if verdict.stop_host and job.host is not None:
            self.stopped_hosts[job.host] = verdict.detail
            self._alert("error", f"{job.host}: launching stopped ({verdict.detail}); free "
                        "space, then `resume`", host=job.host, job=job.id)
        job.reason = verdict.detail if verdict.status == JobStatus.STUCK else None
        self._set_status(job, verdict.status, failure_class=verdict.failure_class,
                         detail=verdict.detail)

    # ---- before deciding -------------------------------------------------------------------

    def _apply_output_scan(self) -> None:
        for name, snap in self.snapshots.items():
            if not snap.ok or name in self._output_scanned:
                continue
            self._output_scanned.add(name)
            for job_id, exists in snap.output_checks.items():
                job = self.jobs.get(job_id)
                if exists and job is not None and job.status in (JobStatus.PENDING,
                                                                 JobStatus.FAILED_OOM):
                    job.retry_at = None
                    self._set_status(job, JobStatus.COMPLETED,
                                     detail="output already exists; not launched")
                    job.reason = "output already exists; not launched"

    def _unblock_recovered(self) -> None:
        """A blocked job whose dependencies are no longer failed (retried) is pending again."""
        if not any(job.status == JobStatus.BLOCKED for job in self.jobs.values()):
            return
        gates = phase_gates(self.manifest, list(self.jobs.values()))
        for job in self.jobs.values():
            gate = gates.get(job.phase)
            recovered = gate is not None and not gate.blocked_reason
            if (job.status == JobStatus.BLOCKED and recovered and job.failure
                    and job.failure.cls == FailureClass.DEPENDENCY):
                    job.reason = None
                    job.failure = None
                    self._set_status(job, JobStatus.PENDING)

    # ---- launching -------------------------------------------------------------------------

    async def _log_root(self, host: str) -> str:
        root = self._log_roots.get(host)
        if root is None:
            root = await self.hosts[host].log_root(self.project, self.token)
            self._log_roots[host] = root
        return root

    async def _launch(self, launches: list[Any], *, background: bool = False) -> None:
        now = self.clock()
        planned: list[tuple[JobState, LaunchRequest]] = []
        for launch in launches:
            job = self.jobs[launch.job_id]
            spec = self._specs[job.id]
            try:
                root = await self._log_root(launch.host)
            except HostError as exc:
                self._alert("warning", f"{launch.host}: {exc}", host=launch.host)
                continue
            n = len(job.history) + 1
            session = session_name(self.project, self.token, job.id, n)
            directory = attempt_dir(root, job.id, n)
            cmd = substitute(job.cmd, gpus=launch.gpus, run_dir=_shell_path(self._run_dir_value()),
                             attempt=n, job_id=job.id)
            job.history.append(Attempt(n=n, host=launch.host, gpus=list(launch.gpus),
                                       session=session, attempt_dir=directory,
                                       log=f"{directory}/log", decided_at=now))
            job.attempts += 1
            job.host, job.gpus = launch.host, list(launch.gpus)
            job.log = f"{directory}/log"
            job.started, job.ended = None, None
            job.retry_at = None
            job.reason = None
            job.last_line = ""
            job.exited_seen_at = None
            self._set_status(job, JobStatus.LAUNCHING)
            planned.append((job, self._launch_request(job, spec, n, session, directory, cmd,
                                                      launch.host, launch.gpus)))
        if not planned:
            return
        self._persist()  # `launching` is on disk before any session starts
        if background:
            for job, request in planned:
                self._launches_in_flight.add(request.session)
                task = asyncio.create_task(self._launch_in_background(job, request, now))
                self._launch_tasks.add(task)
                task.add_done_callback(self._launch_tasks.discard)
            return
        results = await asyncio.gather(
            *(self.hosts[job.host or ""].launch(request) for job, request in planned),
            return_exceptions=True)
        for (job, request), result in zip(planned, results, strict=True):
            self._launch_done(job, request, result, now)

    async def _launch_in_background(self, job: JobState, request: LaunchRequest,
                                    decided: float) -> None:
        """A launch that does not hold up the next tick (another GPU's exit or release is
        acted on while this session starts). Its outcome is applied under the engine lock."""
        host = job.host or ""
        result: BaseException | None = None
        try:
            await self.hosts[host].launch(request)
        except Exception as exc:
            result = exc
        finally:
            self._launches_in_flight.discard(request.session)
        async with self._lock:
            current = job.current
            if result is None and (current is None or current.session != request.session
                                   or job.status not in ACTIVE):
                # killed or requeued while its session was starting: stop that session now
                with contextlib.suppress(Exception):
                    await self.hosts[host].kill(request.session, request.attempt_dir,
                                                self.manifest.launcher)
                return
            self._launch_done(job, request, result, decided)
            if self._dirty:
                self._persist()

    def _launch_done(self, job: JobState, request: LaunchRequest,
                     result: BaseException | None, decided: float) -> None:
        if isinstance(result, BaseException):
            # The probe decides: if the session came up after all it is adopted, else the
            # attempt is undone after the grace period. Never launch twice on a guess.
            job.reason = f"launch reported: {result}"
            self._alert("warning", f"{job.id}: launch on {request.gpus} of {job.host} "
                        f"reported an error: {result}", host=job.host, job=job.id)
            current = job.current
            if current is not None and isinstance(result, HostError):
                current.decided_at = (current.decided_at or decided) - LAUNCH_GRACE_S + 5.0
            self._job_changed(job)
            return
        if job.status != JobStatus.LAUNCHING:
            return  # the probe saw it running first
        job.started = self.clock()
        current = job.current
        if current is not None:
            current.start = job.started
        self._set_status(job, JobStatus.RUNNING)

    def _launch_request(self, job: JobState, spec: JobSpec, n: int, session: str,
                        directory: str, cmd: str, host: str,
                        gpus: tuple[int, ...]) -> LaunchRequest:
        env = {name: var.value for name, var in self.manifest.env.items()}
        env.update({
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "PYTHONUNBUFFERED": "1",
            "EQ_JOB_ID": job.id,
            "EQ_ATTEMPT": str(n),
            "EQ_PROJECT": self.project,
            "EQ_RUN_DIR": self._run_dir_value(),
        })
        return LaunchRequest(job_id=job.id, attempt=n, session=session, attempt_dir=directory,
                             cwd=self._cwd_for(host), cmd=cmd, gpus=gpus, env=env,
                             conda=self.manifest.conda, conda_hook=self.manifest.conda_hook,
                             launcher=self.manifest.launcher)

    # ---- finishing -------------------------------------------------------------------------

    def _check_finished(self) -> None:
        jobs = list(self.jobs.values())
        done = bool(jobs) and all(job.status in FINISHED for job in jobs)
        if not jobs:
            done = True
        if done and not self._finish_reported:
            self.finished = True
            self._finish_reported = True
            ok = all(job.status == JobStatus.COMPLETED for job in jobs)
            self.exit_code = 0 if ok else 1
            self._summary_task = asyncio.ensure_future(self.write_summary())
            self._publish(QueueFinished(project=self.project, at=self.clock(),
                                        counts=status_counts(jobs), exit_code=self.exit_code))
        elif not done and self._finish_reported:
            self.finished = False
            self._finish_reported = False
            self.exit_code = None

    async def write_summary(self) -> None:
        tails: dict[str, list[str]] = {}
        needing = [j for j in self.jobs.values()
                   if j.status in (JobStatus.STUCK, JobStatus.KILLED) and j.current is not None]

        async def fetch(job: JobState) -> None:
            current = job.current
            host = self.hosts.get(current.host) if current else None
            if host is None or current is None:
                return
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    tails[job.id] = await host.tail(current.attempt_dir, 8)

        await asyncio.gather(*(fetch(job) for job in needing[:50]))
        text = render_summary(self.project, list(self.jobs.values()), started=self.created,
                              ended=self.clock(), log_tails=tails)
        self.run_dir.write_summary(text)

    async def wait_summary(self) -> None:
        if self._summary_task is not None:
            await self._summary_task

    # ---- commands --------------------------------------------------------------------------

    async def command(self, name: str, job_ids: list[str] | None = None) -> dict[str, Any]:
        handlers = {"kill": self._kill, "retry": self._retry, "requeue": self._requeue}
        if name in ("pause", "resume"):
            async with self._lock:
                self.paused = name == "pause"
                if name == "resume" and self.stopped_hosts:
                    self._alert("info", "launching resumed on "
                                + ", ".join(sorted(self.stopped_hosts)))
                    self.stopped_hosts.clear()
                self._publish(QueuePaused(project=self.project, at=self.clock(),
                                          paused=self.paused))
                self._persist()
            self.wake()
            return {"ok": True, "results": {}, "error": None}
        if name == "shutdown":
            await self.stop()
            return {"ok": True, "results": {}, "error": None}
        handler = handlers.get(name)
        if handler is None:
            return {"ok": False, "results": {}, "error": f"unknown command {name!r}"}
        if not job_ids:
            return {"ok": False, "results": {}, "error": f"{name} needs at least one job id"}
        results: dict[str, str] = {}
        async with self._lock:
            for job_id in job_ids:
                job = self.jobs.get(job_id)
                if job is None:
                    results[job_id] = "no such job"
                    continue
                try:
                    results[job_id] = await handler(job)
                except HostError as exc:
                    results[job_id] = f"host error: {exc}"
            self._check_finished()
            if self._dirty:
                self._persist()
        self.wake()
        ok = all(value == "ok" for value in results.values())
        return {"ok": ok, "results": results, "error": None if ok else "some jobs were not "
                "changed"}

    async def _stop_session(self, job: JobState) -> None:
        current = job.current
        if current is None or job.host is None or job.host not in self.hosts:
            return
        await self.hosts[job.host].kill(current.session, current.attempt_dir,
                                        self.manifest.launcher)
        current.end = self.clock()

    async def _kill(self, job: JobState) -> str:
        if job.status in FINISHED:
            return f"already {job.status}"
        if job.status in ACTIVE:
            await self._stop_session(job)
            current = job.current
            if current is not None:
                current.failure_class = FailureClass.KILLED
        job.retry_at = None
        job.reason = "killed by the user"
        self._set_status(job, JobStatus.KILLED, failure_class=FailureClass.KILLED,
                         detail="killed by the user")
        return "ok"

    async def _retry(self, job: JobState) -> str:
        if job.status == JobStatus.FAILED_OOM:
            job.retry_at = self.clock()
            self._job_changed(job)
            return "ok"
        if job.status in (JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED):
            job.attempts = 0
            job.retries_by_class = {}
            job.lost_requeues = 0
            job.retry_at = None
            job.reason = None
            job.failure = None
            self._set_status(job, JobStatus.PENDING)
            return "ok"
        return f"cannot retry a {job.status} job"

    async def _requeue(self, job: JobState) -> str:
        if job.status not in ACTIVE and job.status != JobStatus.FAILED_OOM:
            return f"cannot requeue a {job.status} job (only running ones)"
        if job.status in ACTIVE:
            await self._stop_session(job)
            current = job.current
            if current is not None:
                current.failure_class = "requeued"
        job.retry_at = None
        job.reason = "requeued by the user"
        self._set_status(job, JobStatus.PENDING)
        return "ok"

    # ---- reads for front ends ----------------------------------------------------------------

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

    def snapshot(self) -> dict[str, Any]:
        now = self.clock()
        holders = self._held_gpus()
        hosts = []
        for name in self.hosts:
            spec = self._host_specs.get(name)
            snap = self.snapshots.get(name)
            state = self.host_state[name]
            views = self._gpu_views(name, snap, holders, now) if snap else []
            hosts.append({"name": name, "kind": spec.kind if spec else "local",
                          "state": state["state"], "reason": state["reason"],
                          "since": state["since"], "rtt_s": state["rtt_s"],
                          "stopped": self.stopped_hosts.get(name), "gpus": views,
                          "nodes": node_views(snap)})
        return {
            "project": self.project, "run_dir": str(self.run_dir.path), "paused": self.paused,
            "started_at": self.started_at, "created": self.created, "now": now,
            "finished": self.finished, "exit_code": self.exit_code,
            "settings": {"max_attempts": self.manifest.oom_retry.max_attempts,
                         "oom_delay": self.manifest.oom_retry.delay,
                         "threshold_mib": self.manifest.gpu_free_threshold_mib,
                         "waves": self.manifest.waves, "poll": self.poll,
                         "pid": os.getpid()},
            "jobs": [job.to_json() for job in self.jobs.values()],
            "hosts": hosts,
            "alerts": list(self.alerts),
        }

    # ---- preflight -------------------------------------------------------------------------

    async def _preflight(self) -> None:
        request = PreflightRequest(cwd=None, conda=self.manifest.conda,
                                   conda_hook=self.manifest.conda_hook,
                                   launcher=self.manifest.launcher)

        async def one(name: str, host: Host) -> tuple[str, list[Any] | BaseException]:
            try:
                req = PreflightRequest(cwd=self._cwd_for(name), conda=request.conda,
                                       conda_hook=request.conda_hook, launcher=request.launcher)
                return name, await host.preflight(req)
            except Exception as exc:
                return name, exc

        for name, reason in list(self.stopped_hosts.items()):
            if reason.startswith("preflight:"):
                del self.stopped_hosts[name]
        outcomes = await asyncio.gather(*(one(n, h) for n, h in self.hosts.items()))
        unusable = []
        for name, findings in outcomes:
            if isinstance(findings, BaseException):
                unusable.append(f"{name}: {findings}")
                self._alert("error", f"{name}: preflight failed: {findings}", host=name)
                continue
            for finding in findings:
                self._publish(PreflightReported(project=self.project, at=self.clock(),
                                                host=name, check=finding.check, ok=finding.ok,
                                                detail=finding.detail, job=finding.job))
                if not finding.ok and finding.check == "connection":
                    unusable.append(f"{name}: {finding.detail}")
                elif not finding.ok and finding.check in ("cwd", "conda", "launcher"):
                    self.stopped_hosts[name] = f"preflight: {finding.check}: {finding.detail}"
                    unusable.append(f"{name}: {finding.check}: {finding.detail}")
                    self._alert("error", f"{name}: preflight {finding.check} failed: "
                                f"{finding.detail}; no jobs will launch there", host=name)
                elif not finding.ok:
                    self._alert("warning", f"{name}: preflight {finding.check}: "
                                f"{finding.detail}", host=name)
        unusable_hosts = {entry.split(":")[0] for entry in unusable}
        if self.hosts and len(unusable_hosts) == len(self.hosts) and not any(
                job.status in ACTIVE for job in self.jobs.values()):
            raise HostError("no host can be used: " + "; ".join(unusable))
        self._persist()
