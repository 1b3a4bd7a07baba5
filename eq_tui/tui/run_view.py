"""What the UI knows about each engine: the latest snapshot, kept current by its events.

Pure (no Textual): `apply` folds one event in and says what changed, so widgets redraw only that.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from eq_tui.api import Event, JobRecord, ProjectState
from eq_tui.present.pace import DEFAULT_GROUP_OVER, Pace, PaceBook
from eq_tui.tui.progress import Progress, counted
from eq_tui.tui.rows import row_key, split_row_key

MAX_ALERTS = 50
Job = JobRecord
ProjectView = ProjectState  # the engine's reducer holds each project's picture


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
        # kept as records change, for each running job's pace: one group per project and
        # phase (the queue's ETA is the engine's)
        self.paces = PaceBook()
        self._shares: dict[str, dict[str, int]] = {}  # host key -> job id -> jobs on its GPU

    # ---- loading ---------------------------------------------------------------------------

    def load_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        view = ProjectState.from_snapshot(snapshot)
        old = self.projects.get(view.project)
        if old is not None:
            for job_id, job in old.jobs.items():
                self._unindex(row_key(view.project, job_id), job)
                if job_id not in view.jobs:
                    self.paces.update(row_key(view.project, job_id), "", None)
        self.projects[view.project] = view
        for job_id, job in view.jobs.items():
            self._index(row_key(view.project, job_id), job)
        for name, host in view.hosts.items():
            self._shares[row_key(view.project, name)] = gpu_shares(host)
        self.alerts.extend(view.alerts)

    # ---- events ----------------------------------------------------------------------------

    def apply(self, event: Event) -> Changes:
        """Fold one event in (the engine's reducer) and say which rows, hosts and header
        parts changed."""
        view = self.projects.get(event.project)
        if view is None:
            view = self.projects[event.project] = ProjectState(project=event.project)
        applied = view.apply(event)
        changes = Changes(header=applied.header)
        for job_id, old in applied.jobs.items():
            key = row_key(event.project, job_id)
            if old is not None:
                self._unindex(key, old)
            if job_id in view.jobs:
                self._index(key, view.jobs[job_id])
            else:  # retired by a reload: its row goes
                self.paces.update(key, "", None)
            changes.jobs.add(key)
        changes.hosts = {row_key(event.project, host) for host in applied.hosts}
        for host in applied.hosts:
            changes.jobs |= self._reshare(view, host)
        if applied.alert is not None:
            self.alerts.append(applied.alert)
            changes.alerts.append(applied.alert)
        return changes

    def _reshare(self, view: ProjectView, host: str) -> set[str]:
        """The rows whose count of jobs sharing their GPU changed with this host's view."""
        key = row_key(view.project, host)
        old, new = self._shares.get(key, {}), gpu_shares(view.hosts.get(host) or {})
        if old == new:
            return set()
        self._shares[key] = new
        return {row_key(view.project, job_id) for job_id in old.keys() | new.keys()
                if old.get(job_id) != new.get(job_id) and job_id in view.jobs}

    # ---- reading ---------------------------------------------------------------------------

    def shared(self, key: str) -> int:
        """How many of our jobs share the GPU of this job (0: not listed on a shared GPU)."""
        found = self.job(key)
        if found is None or not found[1].get("host"):
            return 0
        host = row_key(found[0].project, str(found[1]["host"]))
        return self._shares.get(host, {}).get(split_row_key(key)[1], 0)

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

    def progress(self) -> Progress:
        """Counts without walking every job."""
        return counted({status: len(keys) for status, keys in self._by_status.items() if keys})

    def pace(self, key: str, now: float) -> Pace | None:
        """A running job's progress, ETA and whether it is slow beside its phase (PaceBook)."""
        return self.paces.pace(key, now)

    def _index(self, key: str, job: Mapping[str, Any]) -> None:
        status = str(job.get("status"))
        self._by_status.setdefault(status, set()).add(key)
        self.paces.update(key, phase_group(key, job), job, self._group_over(key, job))

    def _group_over(self, key: str, job: Mapping[str, Any]) -> str:
        """The key a job's phase averages its seeds over: its siblings differ only in it."""
        view = self.projects.get(split_row_key(key)[0])
        settings = view.settings if view is not None else {}
        by_phase = settings.get("phase_group_over") or {}
        return str(by_phase.get(str(job.get("phase") or "")) or settings.get("group_over")
                   or DEFAULT_GROUP_OVER)

    def _unindex(self, key: str, job: Mapping[str, Any]) -> None:
        status = str(job.get("status"))
        self._by_status.get(status, set()).discard(key)


def phase_group(key: str, job: Mapping[str, Any]) -> str:
    """A job's project and phase: the jobs it is measured against."""
    return row_key(split_row_key(key)[0], str(job.get("phase") or ""))


def gpu_shares(host: Mapping[str, Any]) -> dict[str, int]:
    """Job id -> how many of our jobs share its GPU, for the jobs on a GPU shared by several
    (with several GPUs, the most on one of them)."""
    found: dict[str, int] = {}
    for gpu in host.get("gpus") or ():
        jobs = gpu.get("jobs")
        if jobs and len(jobs) > 1:
            count = len(jobs)
            for job in jobs:
                if found.get(job["id"], 0) < count:
                    found[job["id"]] = count
    return found


def hosts_now(view: RunView, project: str) -> Mapping[str, Mapping[str, Any]]:
    """A project's hosts as the view has them now (the details screen's GPU holders)."""
    state = view.projects.get(project)
    return state.hosts if state is not None else {}
