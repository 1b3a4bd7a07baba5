"""What the UI knows about each engine: the latest snapshot, kept current by its events.

Pure (no Textual): `apply` folds one event in and says what changed, so widgets redraw only that.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from eq_tui.engine.events import (
    Alert,
    Event,
    HostProbed,
    HostStateChanged,
    JobUpdated,
    QueueFinished,
    QueuePaused,
)
from eq_tui.tui.progress import Progress, completed_duration, estimate
from eq_tui.tui.rows import row_key

MAX_ALERTS = 50
ACTIVE = frozenset({"launching", "running"})
Job = dict[str, Any]


@dataclass
class ProjectView:
    project: str
    run_dir: str = ""
    paused: bool = False
    started_at: float | None = None
    finished: bool = False
    exit_code: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def max_attempts(self) -> int:
        return int(self.settings.get("max_attempts") or 1)

    @property
    def threshold_mib(self) -> int:
        return int(self.settings.get("threshold_mib") or 0)


@dataclass
class Changes:
    """What one or more events changed: row keys of jobs, host keys, and flags."""

    jobs: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    header: bool = False
    alerts: list[dict[str, Any]] = field(default_factory=list)

    def merge(self, other: Changes) -> None:
        self.jobs |= other.jobs
        self.hosts |= other.hosts
        self.header = self.header or other.header
        self.alerts.extend(other.alerts)

    @property
    def empty(self) -> bool:
        return not (self.jobs or self.hosts or self.header or self.alerts)


class RunView:
    def __init__(self) -> None:
        self.projects: dict[str, ProjectView] = {}
        self.alerts: deque[dict[str, Any]] = deque(maxlen=MAX_ALERTS)
        self._by_status: dict[str, set[str]] = {}
        self._completed_durations: dict[str, float] = {}

    # ---- loading ---------------------------------------------------------------------------

    def load_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        project = str(snapshot.get("project", ""))
        view = ProjectView(
            project=project, run_dir=str(snapshot.get("run_dir", "")),
            paused=bool(snapshot.get("paused")), started_at=snapshot.get("started_at"),
            finished=bool(snapshot.get("finished")), exit_code=snapshot.get("exit_code"),
            settings=dict(snapshot.get("settings") or {}))
        old = self.projects.get(project)
        if old is not None:
            for job_id, job in old.jobs.items():
                self._unindex(row_key(project, job_id), job)
        self.projects[project] = view
        for job in snapshot.get("jobs") or []:
            view.jobs[str(job["id"])] = dict(job)
            self._index(row_key(project, str(job["id"])), job)
        for host in snapshot.get("hosts") or []:
            view.hosts[str(host["name"])] = dict(host)
        for alert in snapshot.get("alerts") or []:
            self.alerts.append(dict(alert))

    # ---- events ----------------------------------------------------------------------------

    def apply(self, event: Event) -> Changes:
        changes = Changes()
        view = self.projects.get(event.project)
        if view is None:
            view = self.projects[event.project] = ProjectView(project=event.project)
        if isinstance(event, JobUpdated):
            key = row_key(event.project, event.job)
            old = view.jobs.get(event.job)
            if old is not None:
                self._unindex(key, old)
            view.jobs[event.job] = dict(event.state)
            self._index(key, event.state)
            changes.jobs.add(key)
            changes.header = True
            changes.hosts |= self._move_gpu_holder(view, event.job, old, event.state)
        elif isinstance(event, HostProbed):
            host = view.hosts.setdefault(event.host, {"name": event.host, "state": "connecting",
                                                      "reason": "", "gpus": []})
            host["rtt_s"] = event.rtt_s
            if event.ok:
                host["gpus"] = [dict(g) for g in event.gpus]
                host["nodes"] = [dict(n) for n in event.nodes]
            elif event.error:
                host["reason"] = event.error
            changes.hosts.add(row_key(event.project, event.host))
        elif isinstance(event, HostStateChanged):
            host = view.hosts.setdefault(event.host, {"name": event.host, "gpus": []})
            host["state"] = event.state
            host["reason"] = event.reason
            changes.hosts.add(row_key(event.project, event.host))
        elif isinstance(event, QueuePaused):
            view.paused = event.paused
            changes.header = True
        elif isinstance(event, QueueFinished):
            view.finished = True
            view.exit_code = event.exit_code
            changes.header = True
            counts = ", ".join(f"{status} {n}" for status, n in event.counts.items())
            alert = {"project": event.project, "at": event.at,
                     "level": "info" if event.exit_code == 0 else "warning",
                     "message": f"queue finished (exit {event.exit_code}): {counts}"}
            self.alerts.append(alert)
            changes.alerts.append(alert)
        elif isinstance(event, Alert):
            alert = event.to_json()
            self.alerts.append(alert)
            changes.alerts.append(alert)
        return changes

    @staticmethod
    def _move_gpu_holder(view: ProjectView, job_id: str, old: Mapping[str, Any] | None,
                         new: Mapping[str, Any]) -> set[str]:
        """Show a launch or an exit on the GPU at once, not at the next probe (which has the
        last word on memory, settling and other processes)."""
        touched: set[str] = set()

        def gpus_of(job: Mapping[str, Any] | None) -> set[tuple[str, int]]:
            if not job or job.get("status") not in ACTIVE or not job.get("host"):
                return set()
            return {(str(job["host"]), int(g)) for g in job.get("gpus") or []}

        before, after = gpus_of(old), gpus_of(new)
        for host_name, index in before ^ after:
            host = view.hosts.get(host_name)
            for gpu in (host or {}).get("gpus") or []:
                if gpu.get("index") != index:
                    continue
                if (host_name, index) in after:
                    gpu.update(job=job_id, other=False, settling=False)
                elif gpu.get("job") == job_id:
                    # its memory drains until the next probe says otherwise
                    used = gpu.get("memory_used_mib")
                    gpu.update(job=None, settling=used is not None
                               and used >= view.threshold_mib)
                touched.add(row_key(view.project, host_name))
        return touched

    # ---- reading ---------------------------------------------------------------------------

    def job(self, key: str) -> tuple[ProjectView, Job] | None:
        project, _, job_id = key.partition("/")
        view = self.projects.get(project)
        if view is None or job_id not in view.jobs:
            return None
        return view, view.jobs[job_id]

    def iter_jobs(self) -> Iterator[tuple[str, ProjectView, Job]]:
        for view in self.projects.values():
            for job_id, job in view.jobs.items():
                yield row_key(view.project, job_id), view, job

    def keys_with_status(self, *statuses: str) -> list[str]:
        keys: list[str] = []
        for status in statuses:
            keys.extend(self._by_status.get(status, ()))
        return keys

    @property
    def job_count(self) -> int:
        return sum(len(view.jobs) for view in self.projects.values())

    @property
    def paused(self) -> bool:
        return any(view.paused for view in self.projects.values())

    def progress(self, now: float) -> Progress:
        """Counts and ETA without walking every job: the running ones only."""
        counts = {status: len(keys) for status, keys in self._by_status.items() if keys}
        running_elapsed = []
        for key in self.keys_with_status("running", "launching"):
            found = self.job(key)
            started = found[1].get("started") if found else None
            if started is not None:
                running_elapsed.append(now - float(started))
        return estimate(counts, self._completed_durations.values(), running_elapsed)

    def _index(self, key: str, job: Mapping[str, Any]) -> None:
        self._by_status.setdefault(str(job.get("status")), set()).add(key)
        duration = completed_duration(job)
        if duration is not None:
            self._completed_durations[key] = duration

    def _unindex(self, key: str, job: Mapping[str, Any]) -> None:
        self._by_status.get(str(job.get("status")), set()).discard(key)
        self._completed_durations.pop(key, None)
