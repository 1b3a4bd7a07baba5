"""One project's picture as a front end holds it: a snapshot, kept current by the events that
follow it. The one reducer of the event stream, shared by the control client (attach) and the
UI's run view. Pure: no I/O, no UI toolkit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eq_tui.api.client import HostEntry, JobRecord, Snapshot
from eq_tui.api.events import (
    Alert,
    Event,
    HostDrained,
    HostProbed,
    HostStateChanged,
    JobRetired,
    JobUpdated,
    PhaseHeld,
    PhaseReleased,
    QueueEta,
    QueueFinished,
    QueuePaused,
    QueueReopened,
    QueueWaiting,
)
from eq_tui.api.gpu_view import holds_memory
from eq_tui.api.model import ACTIVE

MAX_ALERTS = 200


@dataclass
class Applied:
    """What one event changed: job ids (with each one's record before), host names, whether
    the header (counts, paused, finished) changed, and an alert to show."""

    jobs: dict[str, JobRecord | None] = field(default_factory=dict)
    hosts: set[str] = field(default_factory=set)
    header: bool = False
    alert: dict[str, Any] | None = None


@dataclass
class ProjectState:
    project: str
    run_dir: str = ""
    paused: bool = False
    started_at: float | None = None
    created: float | None = None
    finished: bool = False
    finished_at: float | None = None  # when the last job ended, while finished
    eta_s: float | None = None  # the engine's ETA as of `eta_at` (None: nothing to go on)
    eta_at: float | None = None
    exit_code: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    jobs: dict[str, JobRecord] = field(default_factory=dict)
    hosts: dict[str, HostEntry] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    held_phases: dict[str, str] = field(default_factory=dict)  # the crash guard's, with why
    waiting_reason: str = ""  # the queue's: why waiting jobs with no reason of their own wait

    @classmethod
    def from_snapshot(cls, snapshot: Mapping[str, Any]) -> ProjectState:
        return cls(
            project=str(snapshot.get("project", "")), run_dir=str(snapshot.get("run_dir", "")),
            paused=bool(snapshot.get("paused")), started_at=snapshot.get("started_at"),
            created=snapshot.get("created"), finished=bool(snapshot.get("finished")),
            finished_at=snapshot.get("finished_at") if snapshot.get("finished") else None,
            eta_s=snapshot.get("eta_s"), eta_at=snapshot.get("eta_at"),
            exit_code=snapshot.get("exit_code"), settings=dict(snapshot.get("settings") or {}),
            jobs={str(job["id"]): dict(job) for job in snapshot.get("jobs") or []},  # type: ignore[misc]
            hosts={str(h["name"]): dict(h) for h in snapshot.get("hosts") or []},  # type: ignore[misc]
            alerts=[dict(a) for a in snapshot.get("alerts") or []],
            held_phases=dict(snapshot.get("held_phases") or {}),
            waiting_reason=str(snapshot.get("waiting_reason") or ""))

    def to_snapshot(self) -> Snapshot:
        snap: dict[str, Any] = {
            "project": self.project, "run_dir": self.run_dir, "paused": self.paused,
            "started_at": self.started_at, "finished": self.finished,
            "finished_at": self.finished_at, "eta_s": self.eta_s, "eta_at": self.eta_at,
            "exit_code": self.exit_code, "settings": dict(self.settings),
            "jobs": list(self.jobs.values()), "hosts": list(self.hosts.values()),
            "alerts": list(self.alerts), "held_phases": dict(self.held_phases),
            "waiting_reason": self.waiting_reason}
        if self.created is not None:
            snap["created"] = self.created
        return snap  # type: ignore[return-value]

    @property
    def max_attempts(self) -> int:
        return int(self.settings.get("max_attempts") or 1)

    @property
    def threshold_mib(self) -> int:
        return int(self.settings.get("threshold_mib") or 0)

    # ---- the reducer -----------------------------------------------------------------------

    def apply(self, event: Event) -> Applied:
        applied = Applied()
        if isinstance(event, JobUpdated):
            old = self.jobs.get(event.job)
            new: JobRecord = dict(event.state)  # type: ignore[assignment]
            self.jobs[event.job] = new
            applied.jobs[event.job] = old
            applied.header = True
            applied.hosts |= self._move_gpu_holder(event.job, old, new)
        elif isinstance(event, JobRetired):
            old = self.jobs.pop(event.job, None)
            if old is not None:
                applied.jobs[event.job] = old
                applied.header = True
        elif isinstance(event, HostProbed):
            host = self._host(event.host)
            host["rtt_s"] = event.rtt_s
            if event.ok:
                host["gpus"] = [dict(g) for g in event.gpus]  # type: ignore[misc]
                host["nodes"] = [dict(n) for n in event.nodes]  # type: ignore[misc]
            elif event.error:
                host["reason"] = event.error
            applied.hosts.add(event.host)
        elif isinstance(event, HostDrained):  # a person's drain: "all", the GPUs, or None
            self._host(event.host)["drained"] = (
                (list(event.gpus) or "all") if event.drained else None)
            applied.hosts.add(event.host)
        elif isinstance(event, HostStateChanged):
            host = self._host(event.host)
            host["state"], host["reason"], host["since"] = event.state, event.reason, event.at
            applied.hosts.add(event.host)
        elif isinstance(event, QueuePaused):
            self.paused = event.paused
            applied.header = True
        elif isinstance(event, QueueFinished):
            self.finished, self.exit_code = True, event.exit_code
            self.finished_at = event.finished_at if event.finished_at is not None else event.at
            applied.header = True
            counts = ", ".join(f"{status} {n}" for status, n in event.counts.items())
            applied.alert = {"project": event.project, "at": event.at,
                             "level": "info" if event.exit_code == 0 else "warning",
                             "message": f"queue finished (exit {event.exit_code}): {counts}"}
        elif isinstance(event, QueueEta):
            self.eta_s, self.eta_at = event.eta_s, event.at
            applied.header = True
        elif isinstance(event, QueueReopened):
            self.finished, self.exit_code, self.finished_at = False, None, None
            applied.header = True
        elif isinstance(event, PhaseHeld):
            self.held_phases[event.phase] = event.reason
            applied.header = True
        elif isinstance(event, PhaseReleased):
            self.held_phases.pop(event.phase, None)
            applied.header = True
        elif isinstance(event, QueueWaiting):
            self.waiting_reason = event.reason
            applied.header = True
        elif isinstance(event, Alert):
            applied.alert = event.to_json()
            self.alerts.append(applied.alert)
            del self.alerts[:-MAX_ALERTS]
        return applied

    def _host(self, name: str) -> HostEntry:
        return self.hosts.setdefault(name, {"name": name, "state": "connecting", "reason": "",
                                            "gpus": []})

    def _move_gpu_holder(self, job_id: str, old: Mapping[str, Any] | None,
                         new: Mapping[str, Any]) -> set[str]:
        """Show a launch or an exit on the GPU at once, not at the next probe (which has the
        last word on memory, settling and other processes)."""
        touched: set[str] = set()
        before, after = _gpus_held(old), _gpus_held(new)
        for host_name, index in before ^ after:
            host = self.hosts.get(host_name)
            for gpu in (host or {}).get("gpus") or []:
                if gpu.get("index") != index:
                    continue
                if (host_name, index) in after:
                    gpu["job"], gpu["other"], gpu["settling"] = job_id, False, False
                elif gpu.get("job") == job_id:
                    # its memory drains until the next probe says otherwise
                    gpu["job"] = None
                    gpu["settling"] = holds_memory(gpu.get("memory_used_mib"),
                                                   self.threshold_mib)
                touched.add(host_name)
        return touched


def _gpus_held(job: Mapping[str, Any] | None) -> set[tuple[str, int]]:
    if not job or job.get("status") not in ACTIVE or not job.get("host"):
        return set()
    return {(str(job["host"]), int(g)) for g in job.get("gpus") or []}
