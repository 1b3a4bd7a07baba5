"""The one interface front ends use to talk to an engine: a snapshot, events out, commands in.

The in-process engine implements it directly; the control socket client (attach) implements it
over newline-delimited JSON with the same shapes. The shapes are typed here; they are plain
JSON-ready dicts on the wire. Events: see api/events.py (HostProbed.gpus carries GpuView
dicts, HostProbed.nodes NodeView dicts, JobUpdated.state a JobRecord). `api/reducer.py` folds
a snapshot and the events after it into the current picture, for every front end alike.
"""

from __future__ import annotations

import asyncio
from typing import Any, NotRequired, Protocol, TypedDict

from eq_tui.api.commands import KINDS, Command
from eq_tui.api.events import Event

COMMANDS = tuple(KINDS)  # every command an engine takes, by name (api/commands.py)


class AttemptRecord(TypedDict, total=False):
    n: int
    host: str
    gpus: list[int]
    session: str
    attempt_dir: str
    log: str
    start: float | None
    end: float | None
    exit_code: int | None
    failure_class: str | None
    decided_at: float | None
    launched: bool
    cleanup: str  # leftover processes ended after the attempt
    peak_mib: int | None  # the most GPU memory its processes held on one GPU
    estimate_mib: int | None  # placed by memory: what it holds per GPU; None: GPUs alone
    shared: bool  # placed by memory: other jobs may share its GPUs
    metered_until: float | None  # its cost below is metered up to then (engine's clock)
    shared_off_s: float  # GPU-seconds others had of its shared GPUs (results/cost.py)
    energy_j: float | None  # joules its GPUs drew for it so far; None: no reading yet
    energy_gap: bool  # some of its time had no power reading: its energy is unknown
    end_by_engine: bool  # its end is the engine's clock: the host could not say
    resumed_from: str | None  # the checkpoint it resumed from; None: from scratch


class JobRecord(TypedDict, total=False):
    """JobState.to_json(): host, gpus, log, started and ended are the current attempt's."""

    id: str
    phase: str
    cmd: str
    status: str
    attempts: int  # launches so far
    retry_base: int  # launches before a person last retried it
    attempt_limit: int  # the most launches it can get for its current failure class
    host: str | None
    gpus: list[int]
    log: str | None
    started: float | None
    ended: float | None
    failure: dict[str, str] | None  # {"class", "detail"}
    history: list[AttemptRecord]
    retry_at: float | None
    reason: str | None
    retries_by_class: dict[str, int]
    exited_seen_at: float | None
    last_line: str
    params: dict[str, str]  # the job's grid point
    metrics: dict[str, float | None]  # final metric values once read (null: NaN/inf)
    edits: list[dict[str, Any]]  # what a person (or a reload) changed, in order
    stalled_since: float | None  # hang detection: stalled since then (running jobs only)
    silent_since: float | None  # while stalled: its log's last growth
    mem_escalation: int  # CUDA OOMs on a shared GPU: 1 asks 1.5x its estimate, 2 its GPU alone
    min_gpu_mib: int | None  # its OOM asked more than its card: only larger GPUs from then on
    next_ask_level: int  # the OOMs `next_ask_mib` was computed for (shown when = mem_escalation)
    next_ask_mib: int | None  # the next attempt's ask per GPU after OOMs; None: its GPUs alone


class GpuJob(TypedDict):
    id: str
    mib: int | None  # what it holds there (its estimate until its usage levels off); None: alone
    used: int  # what its processes use there now


class GpuView(TypedDict, total=False):
    """One GPU as the grid draws it. A Slurm host's GPUs are its job slots."""

    index: int
    uuid: str | None
    name: str | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None
    allowed: bool
    job: str | None  # ours on it
    other: bool  # someone else's memory on it
    settling: bool  # our job left it and its memory is still draining
    quarantined: bool
    quarantine_reason: str  # when quarantined: why
    others: list[dict[str, Any]]  # when other: each process's pid, user, command, used_mib
    jobs: list[GpuJob]  # where jobs share GPUs by memory: every job of ours on it
    # who holds it (api/holders.py): {"kind": "ours", "job"}, {"kind": "eq-tui", "user",
    # "project", "job", "attempt", "mib", "used_mib"} (another engine's claim), {"kind":
    # "process", "pid", "user", "command", "used_mib"}
    holders: list[dict[str, Any]]
    rule: str  # a lab rule keeps it from us now: which ("box1 keeps GPU 7 free ...")


class NodeView(TypedDict):
    """A Slurm partition node (empty list for other hosts)."""

    name: str
    state: str  # Slurm's, e.g. "MIXED+DRAIN"
    gpus_used: int  # by anyone
    gpus_total: int
    jobs: list[str]  # ours running there


class HostEntry(TypedDict, total=False):
    name: str
    kind: str
    state: str  # connecting | up | down
    reason: str
    since: float
    rtt_s: float | None
    stopped: str | None  # why nothing launches there, if so
    drained: str | list[int] | None  # a person's `eq-tui drain`: "all", its GPUs, or None
    gpus: list[GpuView]
    nodes: list[NodeView]


class Settings(TypedDict, total=False):
    max_attempts: int
    oom_delay: float
    threshold_mib: int
    waves: str
    poll: float
    pid: int
    goals: dict[str, str]  # metric -> max | min (the manifest's goal, phases merged)
    group_over: str  # the grid key results average over
    phase_group_over: dict[str, str]  # each phase's own (a phase may set its own)


class Snapshot(TypedDict, total=False):
    project: str
    run_dir: str
    paused: bool
    started_at: float
    created: float
    now: float
    finished: bool
    finished_at: float | None  # when the last job ended, while finished
    eta_s: float | None  # the engine's ETA of the queue as of `eta_at` (None: nothing known)
    eta_at: float | None
    exit_code: int | None
    settings: Settings
    jobs: list[JobRecord]  # manifest order
    hosts: list[HostEntry]
    alerts: list[dict[str, Any]]  # Alert.to_json(), most recent last, bounded
    held_phases: dict[str, str]  # phase -> why the crash guard holds it
    waiting_reason: str  # why waiting jobs with no reason of their own wait (the queue's)


class CommandResult(TypedDict):
    ok: bool
    results: dict[str, str]  # job id -> "ok" or why it was not changed
    error: str | None
    detail: NotRequired[dict[str, Any]]  # clone/add: {"job"}; reload: its plan
    duplicate: NotRequired[bool]  # a command id seen before: the first one's result


class SecretsAnswer(TypedDict):
    """An engine's answer to secrets handed to it while it runs (names only, never values)."""

    given: list[str]           # taken: kept in the engine's memory, never written
    refused: dict[str, str]    # name -> why (not a secret of this manifest, already provided)
    missing: list[str]         # the secrets it still lacks: no job launches until it has them
    error: str | None          # the whole hand-over refused (another project's engine)


class EngineClient(Protocol):
    @property
    def project(self) -> str: ...

    def snapshot(self) -> Snapshot: ...

    def subscribe(self) -> asyncio.Queue[Event]:
        """A queue that receives every event published from now on."""
        ...

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None: ...

    async def command(self, name: str, job_ids: list[str] | None = None,
                      args: dict[str, Any] | None = None,
                      command_id: str | None = None) -> CommandResult:
        """`args`: what the command needs beyond job ids (edit, clone, add, priority, reload,
        and `by`: who sends it); `command_id`: the client's id, so a resend applies once."""
        ...

    async def send(self, command: Command, command_id: str | None = None) -> CommandResult:
        """A typed command (eq_tui/api/commands.py): what the UI and the shell verbs send;
        `command` above is the same on the wire."""
        ...

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        """The last lines of a job's attempt log (current attempt when None), cleaned of ANSI."""
        ...
