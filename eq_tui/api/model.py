"""Run state: the jobs as the engine tracks them, serialisable to queue_state.json."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    PENDING = "pending"
    LAUNCHING = "launching"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED_OOM = "failed_oom"
    STUCK = "stuck"
    KILLED = "killed"
    BLOCKED = "blocked"
    HELD = "held"  # a person holds it: it never launches until released
    PRUNED = "pruned"  # early stopping stopped it as a loser: finished, not a failure

    @property
    def is_active(self) -> bool:
        """It holds (or is about to hold) a session and its GPUs."""
        return self in ACTIVE

    @property
    def is_finished(self) -> bool:
        """Nothing more happens to it without a person (or it completed)."""
        return self in FINISHED

    @property
    def is_waiting(self) -> bool:
        """It waits for a GPU: never launched yet, or an OOM retry."""
        return self in WAITING

    @property
    def needs_person(self) -> bool:
        return self in NEEDS_PERSON

    @property
    def is_held(self) -> bool:
        """Neither waiting nor finished: it waits for a person's release, and keeps the queue
        from finishing."""
        return self is JobStatus.HELD


ACTIVE = frozenset({JobStatus.LAUNCHING, JobStatus.RUNNING})
WAITING = frozenset({JobStatus.PENDING, JobStatus.FAILED_OOM})
NEEDS_PERSON = frozenset({JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED})
FINISHED = NEEDS_PERSON | {JobStatus.COMPLETED, JobStatus.PRUNED}


class FailureClass(StrEnum):
    CUDA_OOM = "cuda_oom"
    HOST_OOM = "host_oom"
    DISK_FULL = "disk_full"
    NCCL = "nccl"
    GPU_FAULT = "gpu_fault"
    PORT_IN_USE = "port_in_use"
    STALE = "stale"
    LOST = "lost"
    OUTPUT_MISSING = "output_missing"
    EXIT_NONZERO = "exit_nonzero"
    DEPENDENCY = "dependency"
    KILLED = "killed"
    LAUNCH_FAILED = "launch_failed"
    REQUEUED = "requeued"  # a person requeued a running attempt
    STALLED = "stalled"  # hang detection stopped it (on_stall: restart | kill)
    # a resume from a checkpoint failed before any progress: the next falls back a checkpoint
    RESUME_FAILED = "resume_failed"


def _plain(value: Any) -> Any:
    """A field's value as JSON-ready data, as `dataclasses.asdict` makes it: dataclasses to
    dicts, lists and dicts copied (nothing shared with the job)."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, Attempt | Failure):
        return {name: _plain(getattr(value, name)) for name in _names(type(value))}
    return asdict(value) if hasattr(value, "__dataclass_fields__") else copy.deepcopy(value)


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass
class Failure:
    cls: str
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"class": self.cls, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Failure | None:
        if not data:
            return None
        return cls(cls=str(data.get("class", "")), detail=str(data.get("detail", "")))


@dataclass
class Attempt:
    n: int
    host: str
    gpus: list[int]
    session: str
    attempt_dir: str
    log: str
    start: float | None = None
    end: float | None = None
    exit_code: int | None = None
    failure_class: str | None = None
    decided_at: float | None = None  # when the engine recorded `launching` for this attempt
    launched: bool = True  # False: the session never started (does not count as a launch)
    cleanup: str = ""  # leftover processes ended after it (leftover-memory cleanup)
    peak_mib: int | None = None  # the most GPU memory its processes held on one of its GPUs
    estimate_mib: int | None = None  # what it was placed for (per GPU); None: a GPU alone
    shared: bool = False  # placed by memory: other jobs may share its GPUs
    # what it cost (engine/tick/cost.py), metered from the probes up to `metered_until`: the
    # GPU-seconds other processes had of its shared GPUs (its own are its time x GPUs less
    # these), the energy its GPUs drew for it (None: no reading yet), and whether some of its
    # time had no power reading (then its energy is unknown, never a partial figure)
    metered_until: float | None = None
    shared_off_s: float = 0.0
    energy_j: float | None = None
    energy_gap: bool = False
    # its `end` is the engine's clock: the host had no record of when it ended (a session
    # lost with its host, a stop on a host that cannot say); else both ends are the host's
    end_by_engine: bool = False
    # the checkpoint it resumed from (a path on its host, relative to the job's working
    # directory); None: it started from scratch
    resumed_from: str | None = None
    preempted_by: str | None = None  # the job of higher priority it was stopped for

    def close(self, end: float) -> None:
        """Record its end, never before its start: an exit record with whole seconds only, or
        an engine's clock behind the host's, must not make a negative duration."""
        self.end = end if self.start is None else max(end, self.start)


@dataclass(slots=True)
class JobState:
    """A job and its attempts. Where it runs, its log and its times are its current attempt's:
    they are read from `history`, never copied."""

    id: str
    phase: str
    cmd: str
    status: JobStatus = JobStatus.PENDING
    attempts: int = 0  # launches so far (never reset)
    # launches before a person last retried it: its retry budget counts from here
    retry_base: int = 0
    # the most launches it can get as things stand (attempts, once nothing more will launch
    # without a person); kept by the ledger, shown as `attempts/attempt_limit`
    attempt_limit: int = 0
    failure: Failure | None = None
    history: list[Attempt] = field(default_factory=list)
    retry_at: float | None = None  # failed_oom / delayed retry: not before this time
    reason: str | None = None  # why it waits (unmet precondition, dependency, ...)
    retries_by_class: dict[str, int] = field(default_factory=dict)
    exited_seen_at: float | None = None  # when we first saw its exit record with the session alive
    last_line: str = ""
    params: dict[str, str] = field(default_factory=dict)  # its grid point (results group on it)
    metrics: dict[str, float | None] = field(default_factory=dict)  # final values, once read
    priority: int = 0  # higher launches first (the manifest's, or a person's)
    priority_set: bool = False  # a person set it: the manifest's no longer applies
    edits: list[dict[str, Any]] = field(default_factory=list)  # what a person changed, in order
    origin: str = "manifest"  # or "added"/"clone"/"reload": made while the queue ran
    spec: dict[str, Any] | None = None  # for a job made at run time: its JobSpec, as JSON
    stalled_since: float | None = None  # hang detection: when it was judged stalled
    silent_since: float | None = None  # while stalled: when its log last grew
    # CUDA OOMs on a shared GPU so far: 1 asks for 1.5x its estimate, 2 for its GPUs alone
    mem_escalation: int = 0
    # its CUDA OOM asked more than its card's total: it launches only on GPUs larger than this
    min_gpu_mib: int | None = None
    # what the scheduler asks for its next attempt after CUDA OOMs on a shared GPU, as the
    # engine computed it (engine/tick/memory_asks.py) for `next_ask_level` OOMs: MiB per GPU,
    # None for its GPUs alone; front ends show it only while the level is `mem_escalation`
    next_ask_level: int = 0
    next_ask_mib: int | None = None
    # early stopping: the current attempt's reports of the phase's early_stop metric, in order
    # (its step is their count), and how far into its log they were read
    reports: list[float] = field(default_factory=list)
    reports_attempt: int = 0  # the attempt `reports` belong to
    reports_offset: int = 0  # bytes of that attempt's log read for reports
    run_to_end: bool = False  # a person retried it after it was pruned: never stopped early
    # an attempt that resumed from a checkpoint carries the reports made before it: how many
    # (trimmed, at its first own report, to those made before the position it resumed at),
    # and the whole job's progress fraction at each report (None: not known)
    reports_carried: int = 0
    report_fractions: list[float | None] | None = None
    # the whole job's progress in its current attempt (api/job_progress.py JobProgress, as
    # JSON: `fraction`, `at` — when that fraction was first seen —, `unit`, `total`,
    # `source`), kept by the engine from what its probes saw (engine/tick/progress.py); None
    # before any, and again on a new attempt
    progress: dict[str, Any] | None = None
    progress_attempt: int = 0  # the attempt `progress` belongs to
    # checkpoints a resume failed on at once (engine/tick/resume.py): never chosen again
    failed_checkpoints: list[str] = field(default_factory=list)

    @property
    def current(self) -> Attempt | None:
        return self.history[-1] if self.history else None

    def change_cmd(self, new: str) -> None:
        """A new command: what the old one's failures taught (its OOM's size) no longer holds."""
        self.cmd = new
        self.min_gpu_mib = None

    @property
    def placed(self) -> Attempt | None:
        """The current attempt when its session started (where the job is); None before the
        first launch or when the current attempt's session never started."""
        current = self.history[-1] if self.history else None
        return current if current is not None and current.launched else None

    @property
    def host(self) -> str | None:
        placed = self.placed
        return placed.host if placed is not None else None

    @property
    def gpus(self) -> list[int]:
        placed = self.placed
        return placed.gpus if placed is not None else []

    @property
    def log(self) -> str | None:
        current = self.current
        return current.log if current is not None else None

    @property
    def started(self) -> float | None:
        current = self.current
        return current.start if current is not None else None

    @property
    def ended(self) -> float | None:
        current = self.current
        return current.end if current is not None else None

    @property
    def lost_count(self) -> int:
        """Attempts whose session vanished with no exit record."""
        return self.retries_by_class.get(FailureClass.LOST, 0)

    def to_json(self) -> dict[str, Any]:
        # what dataclasses.asdict gives, without its deep copy of every leaf: every change
        # of every job is serialised (for the bus and the state file), and asdict was a
        # millisecond a job, on the event loop
        data = {name: _plain(getattr(self, name)) for name in _names(JobState)}
        data["status"] = str(self.status)
        data["failure"] = self.failure.to_json() if self.failure else None
        # front ends and the state file read these flat; they are derived on the way out
        data.update(host=self.host, gpus=self.gpus, log=self.log, started=self.started,
                    ended=self.ended)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobState:
        history = [Attempt(**attempt) for attempt in data.get("history", [])]
        return cls(
            id=data["id"],
            phase=data["phase"],
            cmd=data["cmd"],
            status=JobStatus(data["status"]),
            attempts=int(data.get("attempts", 0)),
            retry_base=int(data.get("retry_base") or 0),
            attempt_limit=int(data.get("attempt_limit") or 0),
            failure=Failure.from_json(data.get("failure")),
            history=history,
            retry_at=data.get("retry_at"),
            reason=data.get("reason"),
            retries_by_class=dict(data.get("retries_by_class") or {}),
            exited_seen_at=data.get("exited_seen_at"),
            last_line=str(data.get("last_line") or ""),
            params={str(k): str(v) for k, v in (data.get("params") or {}).items()},
            metrics=dict(data.get("metrics") or {}),
            priority=int(data.get("priority") or 0),
            priority_set=bool(data.get("priority_set")),
            edits=list(data.get("edits") or []),
            origin=str(data.get("origin") or "manifest"),
            spec=data.get("spec"),
            stalled_since=data.get("stalled_since"),
            silent_since=data.get("silent_since"),
            mem_escalation=int(data.get("mem_escalation") or 0),
            min_gpu_mib=data.get("min_gpu_mib"),
            next_ask_level=int(data.get("next_ask_level") or 0),
            next_ask_mib=data.get("next_ask_mib"),
            reports=[float(x) for x in data.get("reports") or []],
            reports_attempt=int(data.get("reports_attempt") or 0),
            reports_offset=int(data.get("reports_offset") or 0),
            run_to_end=bool(data.get("run_to_end")),
            reports_carried=int(data.get("reports_carried") or 0),
            report_fractions=list(data["report_fractions"])
            if isinstance(data.get("report_fractions"), list) else None,
            progress=data["progress"] if isinstance(data.get("progress"), dict) else None,
            progress_attempt=int(data.get("progress_attempt") or 0),
            failed_checkpoints=[str(x) for x in data.get("failed_checkpoints") or []],
        )


def attempt_limit(job: JobState, max_attempts: int) -> int:
    """The most launches `job` can get for its current failure class: what it had, once it is
    finished (a stuck job gets no more without a person); else its retry budget."""
    if job.status.is_finished:
        return job.attempts
    return max(job.attempts, job.retry_base + max_attempts)


def status_counts(jobs: Sequence[JobState]) -> dict[str, int]:
    counts = Counter(str(job.status) for job in jobs)
    return {str(status): counts[str(status)] for status in JobStatus if counts[str(status)]}


def last_end(jobs: Sequence[JobState], default: float) -> float:
    """When the last of these jobs' attempts ended (its host's clock where the host said);
    `default` when none has an end (every job finished without running)."""
    ends = [attempt.end for job in jobs for attempt in job.history if attempt.end is not None]
    return max(ends, default=default)
