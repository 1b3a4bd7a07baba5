"""Run state: the jobs as the engine tracks them, serialisable to queue_state.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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


ACTIVE = frozenset({JobStatus.LAUNCHING, JobStatus.RUNNING})
FINISHED = frozenset({JobStatus.COMPLETED, JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED})
NEEDS_PERSON = frozenset({JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED})


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


@dataclass
class JobState:
    id: str
    phase: str
    cmd: str
    status: JobStatus = JobStatus.PENDING
    attempts: int = 0  # launches so far
    host: str | None = None
    gpus: list[int] = field(default_factory=list)
    started: float | None = None
    ended: float | None = None
    log: str | None = None
    failure: Failure | None = None
    history: list[Attempt] = field(default_factory=list)
    retry_at: float | None = None  # failed_oom / delayed retry: not before this time
    reason: str | None = None  # why it waits (unmet precondition, dependency, ...)
    lost_requeues: int = 0
    retries_by_class: dict[str, int] = field(default_factory=dict)
    exited_seen_at: float | None = None  # when we first saw its exit record with the session alive
    last_line: str = ""

    @property
    def current(self) -> Attempt | None:
        return self.history[-1] if self.history else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data["failure"] = self.failure.to_json() if self.failure else None
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
            host=data.get("host"),
            gpus=list(data.get("gpus") or []),
            started=data.get("started"),
            ended=data.get("ended"),
            log=data.get("log"),
            failure=Failure.from_json(data.get("failure")),
            history=history,
            retry_at=data.get("retry_at"),
            reason=data.get("reason"),
            lost_requeues=int(data.get("lost_requeues", 0)),
            retries_by_class=dict(data.get("retries_by_class") or {}),
            exited_seen_at=data.get("exited_seen_at"),
            last_line=str(data.get("last_line") or ""),
        )
