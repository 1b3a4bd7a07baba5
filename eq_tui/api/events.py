"""Events the engine publishes: past-tense facts, serialisable to one JSON object each.

The same schema is written to events.jsonl, printed by `--no-ui --json`, and sent over the
control socket.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"
    project: str
    at: float

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["type"] = self.type
        return data


@dataclass(frozen=True)
class JobStateChanged(Event):
    type: ClassVar[str] = "job_state_changed"
    job: str
    old: str
    new: str
    host: str | None = None
    gpus: tuple[int, ...] = ()
    attempt: int = 0
    failure_class: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class JobUpdated(Event):
    """A job's record changed (status or anything else); `state` is its full JobState JSON.

    Front ends key their rows on this. It is not written to events.jsonl (JobStateChanged is
    the history); it goes to live subscribers only.
    """

    type: ClassVar[str] = "job_updated"
    job: str
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostProbed(Event):
    type: ClassVar[str] = "host_probed"
    host: str
    ok: bool
    rtt_s: float | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()
    nodes: tuple[dict[str, Any], ...] = ()  # a Slurm host's NODE_VIEWs (api/client.py)


@dataclass(frozen=True)
class HostStateChanged(Event):
    type: ClassVar[str] = "host_state_changed"
    host: str
    state: str  # connecting | up | down
    reason: str = ""


@dataclass(frozen=True)
class Alert(Event):
    type: ClassVar[str] = "alert"
    level: str  # info | warning | error
    message: str
    host: str | None = None
    job: str | None = None


@dataclass(frozen=True)
class QueuePaused(Event):
    type: ClassVar[str] = "queue_paused"
    paused: bool


@dataclass(frozen=True)
class QueueWaiting(Event):
    """Why the waiting jobs with no reason of their own wait (the queue's reason changed)."""

    type: ClassVar[str] = "queue_waiting"
    reason: str


@dataclass(frozen=True)
class QueueFinished(Event):
    """Every job finished. `finished_at`: when the last of them ended (the host's clock where
    it said), so a finished run's elapsed time stands still; None: not known (an older engine)."""

    type: ClassVar[str] = "queue_finished"
    counts: dict[str, int] = field(default_factory=dict)
    exit_code: int = 0
    finished_at: float | None = None


@dataclass(frozen=True)
class QueueEta(Event):
    """How long the queue still needs, as of `at` (None: nothing to go on yet): the engine's
    estimate (present/queue_eta.py), sent when it moves away from counting down; front ends
    count it down and compute none."""

    type: ClassVar[str] = "queue_eta"
    eta_s: float | None = None


@dataclass(frozen=True)
class QueueReopened(Event):
    """A finished queue has work again (a job added, retried, edited or reloaded): it is no
    longer finished."""

    type: ClassVar[str] = "queue_reopened"


@dataclass(frozen=True)
class PreflightReported(Event):
    type: ClassVar[str] = "preflight"
    host: str
    check: str
    ok: bool
    detail: str = ""
    job: str | None = None


@dataclass(frozen=True)
class JobEdited(Event):
    """A person changed what a job runs (edit, or a reload of the manifest); `by` says from
    where. A finished job edited is requeued (`requeued`) with a fresh attempt count."""

    type: ClassVar[str] = "job_edited"
    job: str
    old_cmd: str
    new_cmd: str
    by: str = ""
    requeued: bool = False


@dataclass(frozen=True)
class JobAdded(Event):
    """A job made while the queue runs: `origin` is added, clone (of `source`) or reload."""

    type: ClassVar[str] = "job_added"
    job: str
    phase: str
    cmd: str
    origin: str
    source: str | None = None
    by: str = ""
    spec: dict[str, Any] = field(default_factory=dict)  # its definition (job_specs.py)


@dataclass(frozen=True)
class JobRetired(Event):
    """A waiting job a reload removed from the queue (it stays in the state's `retired`)."""

    type: ClassVar[str] = "job_retired"
    job: str
    by: str = ""


@dataclass(frozen=True)
class PhaseHeld(Event):
    """The crash guard stopped launching a phase: `jobs` failed the same way soon after they
    started. It waits for a person (`retry` of one of them, `release --phase`, or `resume`):
    `todo` says the exact commands (api/held.py)."""

    type: ClassVar[str] = "phase_held"
    phase: str
    jobs: tuple[str, ...] = ()
    failure_class: str = ""
    line: str = ""  # the last log line they share
    reason: str = ""
    todo: str = ""


@dataclass(frozen=True)
class PhaseReleased(Event):
    type: ClassVar[str] = "phase_released"
    phase: str
    by: str = ""  # what released it: "retry of JOB" or "resume"


@dataclass(frozen=True)
class JobStalled(Event):
    """Hang detection judged a running job stalled (`action`: alert, restart or kill), or
    saw it recover (`action`: recovered)."""

    type: ClassVar[str] = "job_stalled"
    job: str
    host: str | None = None
    gpus: tuple[int, ...] = ()
    attempt: int = 0
    silent_s: float = 0.0
    signs: tuple[str, ...] = ()  # log_silent, gpus_idle, no_progress, hang_line
    action: str = "alert"
    detail: str = ""


@dataclass(frozen=True)
class JobPruned(Event):
    """Early stopping stopped a running job as a loser at its `step`-th report of `metric`:
    its `value` (its configuration's mean over the seeds at that report) beside the `cutoff`
    of the `rivals` configurations there (`rule`: asha or median)."""

    type: ClassVar[str] = "job_pruned"
    job: str
    phase: str = ""
    host: str | None = None
    attempt: int = 0
    metric: str = ""
    step: int = 0
    value: float = 0.0
    cutoff: float = 0.0
    rivals: int = 0
    rule: str = "asha"
    detail: str = ""


@dataclass(frozen=True)
class GpuQuarantined(Event):
    """A GPU was quarantined (`released`: false) or a person released it (`released`: true)."""

    type: ClassVar[str] = "gpu_quarantined"
    host: str
    gpu: int
    reason: str = ""
    released: bool = False


@dataclass(frozen=True)
class HostDrained(Event):
    """A person drained a host (`gpus`: those drained, empty for the whole host; `stopped`:
    the jobs stopped there to resume elsewhere, with --now) or gave it back (`drained`:
    false)."""

    type: ClassVar[str] = "host_drained"
    host: str
    drained: bool = True
    gpus: tuple[int, ...] = ()
    stopped: tuple[str, ...] = ()
    by: str = ""


@dataclass(frozen=True)
class JobPreempted(Event):
    """`job` was stopped so that `by` (a waiting job of higher priority) could start on `host`'s
    `gpus`; it resumes later from its checkpoint (`count`: its preemptions so far)."""

    type: ClassVar[str] = "job_preempted"
    job: str
    by: str
    host: str
    gpus: tuple[int, ...] = ()
    signal: str = "TERM"
    count: int = 1


class Fanout:
    """Subscriber queues: every event published goes to each queue subscribed at the time."""

    def __init__(self) -> None:
        self._queues: list[asyncio.Queue[Event]] = []

    def subscribe(self) -> asyncio.Queue[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        with contextlib.suppress(ValueError):
            self._queues.remove(queue)

    def publish(self, event: Event) -> None:
        for queue in list(self._queues):
            queue.put_nowait(event)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (JobStateChanged, JobUpdated, HostProbed, HostStateChanged, Alert,
                              QueuePaused, QueueFinished, QueueReopened, QueueEta,
                              PreflightReported, JobEdited, JobAdded, JobRetired, PhaseHeld,
                              PhaseReleased, JobStalled, GpuQuarantined, QueueWaiting, JobPruned,
                              HostDrained, JobPreempted)
}


def event_from_json(data: dict[str, Any]) -> Event:
    """The inverse of Event.to_json (for the control socket client); unknown keys are dropped."""
    cls = EVENT_TYPES.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    names = set(cls.__dataclass_fields__) - {"type"}
    fields = {k: v for k, v in data.items() if k in names}
    for key in ("gpus", "warnings", "nodes", "jobs", "signs", "stopped"):
        if key in fields and isinstance(fields[key], list):
            fields[key] = tuple(fields[key])
    return cls(**fields)
