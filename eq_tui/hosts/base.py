"""The Host protocol: the one interface the engine uses to touch a machine.

Everything here is plain data. A host answers one `probe` per tick with a `HostSnapshot`
that holds all the engine needs (GPUs, compute processes, our sessions, exit records,
output checks, preconditions), and runs `launch`, `kill` and `tail` as their own short
commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from eq_tui.hosts.claim_types import ClaimTicket, GpuClaim
    from eq_tui.hosts.lab_rules import HostLab

LauncherName = Literal["screen", "tmux"]


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    memory_used_mib: int | None  # None: the reading was [N/A] / [Not Supported] / missing
    memory_total_mib: int | None
    utilization_pct: int | None
    power_w: float | None = None  # the board's power draw now; None: [N/A] or not read
    # NVML's total-energy counter (joules since the driver loaded; Volta and later, local
    # NVML only: nvidia-smi has no such field); None where it was not read
    energy_j: float | None = None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu_uuid: str
    used_mib: int | None
    user: str = ""  # who runs it and its command line, where the host could tell
    command: str = ""
    pgid: int | None = None  # its process group and session: which attempt it belongs to
    sid: int | None = None
    # False: the host's `ps` had no such process (memory still charged to a process that is
    # gone); None: not looked up
    running: bool | None = None
    # its own SM utilisation (NVML's per-process samples, `nvidia-smi pmon`): 0 when it computed
    # nothing; None when the host gave no per-process reading
    util_pct: int | None = None


@dataclass(frozen=True)
class GpuHealth:
    """What nvidia-smi says of a GPU's health without root (None: not reported, e.g. no ECC)."""

    index: int
    uuid: str
    ecc_uncorrected: int | None
    pages_pending: bool | None


@dataclass(frozen=True)
class AttemptRef:
    """One attempt the engine is watching on a host."""

    key: str  # job id (unique within a project)
    session: str  # exact session name
    attempt_dir: str  # directory holding log, pid, start, exit
    output_check: str | None  # glob relative to cwd, checked once the attempt has exited


@dataclass(frozen=True)
class AttemptProbe:
    key: str
    session_alive: bool
    pid: int | None
    pid_alive: bool
    started: float | None  # epoch seconds written by the wrapper
    exit_code: int | None  # None: no exit record yet
    exited_at: float | None  # mtime of the exit record
    log_size: int
    output_ok: bool | None  # None when not checked (no output_check, or not exited)
    log_tail: str = ""  # the attempt's last bytes, only once it has exited
    last_line: str = ""  # last non-empty log line (cleaned of ANSI / \r), for the job table
    # the last line of the log's tail that states an epoch counter, when it is not last_line
    # (Keras's `Epoch 5/8` above its bar): the whole job's progress (engine/tick/progress.py)
    epoch_line: str = ""
    detail: str = ""  # what the host says about a waiting attempt, e.g. "PENDING (Resources)"
    pgid: int | None = None  # the attempt's process group (its GPU processes carry it)
    # the log from the offset the request asked to follow (up to FOLLOW_BYTES), while it runs
    followed: bytes = b""
    followed_from: int | None = None  # that offset; None: not followed this time


@dataclass(frozen=True)
class PathCheck:
    key: str  # job id
    pattern: str  # glob relative to cwd


@dataclass(frozen=True)
class ClusterNode:
    """A node of a Slurm host's partition: its GPUs allocated (to anyone) and our jobs on it."""

    name: str
    state: str  # Slurm's, e.g. IDLE, MIXED, ALLOCATED, MIXED+DRAIN, DOWN*
    gpus_used: int
    gpus_total: int
    jobs: tuple[str, ...] = ()  # ids of our jobs running there


@dataclass(frozen=True)
class ProbeRequest:
    attempts: tuple[AttemptRef, ...] = ()
    output_checks: tuple[PathCheck, ...] = ()  # pending jobs: already done?
    preconditions: tuple[PathCheck, ...] = ()  # jobs about to launch
    cwd: str | None = None
    health: bool = False  # also read the GPUs' health (ECC errors, pages pending)
    cores: bool = False  # also count the host's CPU cores (CPU-only jobs' default cap)
    want: str | None = None  # whether this engine waits for GPUs there (claims.want_arg)
    # attempts whose log is read from an offset (early stopping reads the reports in it)
    follow: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class HostSnapshot:
    host: str
    ok: bool
    taken_at: float
    error: str | None = None
    rtt_s: float | None = None
    gpus: tuple[GpuReading, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    sessions: frozenset[str] = frozenset()
    attempts: dict[str, AttemptProbe] = field(default_factory=dict)
    output_checks: dict[str, bool] = field(default_factory=dict)
    preconditions: dict[str, bool] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    nodes: tuple[ClusterNode, ...] = ()  # a cluster host's nodes (Slurm); empty elsewhere
    health: tuple[GpuHealth, ...] = ()  # when the request asked for it
    cores: int | None = None  # CPU cores, when the request asked for them
    claims: tuple[GpuClaim, ...] = ()  # every engine's live claims on its GPUs (claims.py)
    lab: HostLab | None = None  # the lab's rules there, who we are there (lab_rules.py)


@dataclass(frozen=True)
class LaunchRequest:
    job_id: str
    attempt: int
    session: str
    attempt_dir: str
    cwd: str | None
    cmd: str
    gpus: tuple[int, ...]
    env: dict[str, str]  # includes secret values: passed on stdin, never on a command line
    conda: str | None
    conda_hook: str | None
    launcher: LauncherName
    venv: str | None = None
    claim: ClaimTicket | None = None  # take claims on its GPUs first (claims.py)
    drain: DrainWait | None = None  # wait on the host for GPUs still draining first
    resumed_from: str | None = None  # the checkpoint `cmd` resumes from (engine/tick/resume.py)


# A person's kill: the job's signal, then SIGKILL once this grace has run out. Short: the GPU is
# freed at once when the job is gone, and a person who wants a checkpoint first asks for more.
KILL_GRACE_S = 5.0
MAX_GRACE_S = 86400.0


@dataclass(frozen=True)
class Stop:
    """How an attempt is stopped: `signal` (a name: TERM, USR1, ...) to the job's processes
    while its wrapper and session stay up, then SIGKILL to what is left after `grace_s`
    seconds (not waited once the job is gone)."""

    signal: str = "TERM"
    grace_s: float = KILL_GRACE_S

    def __post_init__(self) -> None:
        name = self.signal.upper().removeprefix("SIG")
        if not name.isalnum() or not name.isascii():
            raise ValueError(f"not a signal name: {self.signal!r}")
        if not 0 <= self.grace_s <= MAX_GRACE_S:
            raise ValueError(f"a stop's grace is 0 to {MAX_GRACE_S:g} s, not {self.grace_s!r}")
        object.__setattr__(self, "signal", name)

    def args(self) -> list[str]:
        """The signal and the grace as the stop scripts take them (seconds, to the tenth)."""
        return [self.signal, format(round(self.grace_s, 1), "g")]


PERSON_STOP = Stop()  # SIGTERM, SIGKILL after KILL_GRACE_S: every stop but a person's own grace


@dataclass(frozen=True)
class Stopped:
    """How a stopped attempt ended by its own records on the host: its exit code, and when it
    started and ended by the host's clock (None: no record, or a host that cannot tell)."""

    code: int | None = None
    ended_at: float | None = None
    started_at: float | None = None


@dataclass(frozen=True)
class DrainWait:
    """A launch decided while its GPUs' last job of ours was still releasing its memory: the
    launch script waits until each of `gpus` reads below `below_mib`, looking every `every_s`
    seconds, at most `rounds` times more; then it is refused (nothing started, nothing spent)."""

    gpus: tuple[int, ...]
    below_mib: int
    rounds: int
    every_s: float


@dataclass(frozen=True)
class CommandCheck:
    """A distinct command's first word (and the script it runs, if any), checked by preflight
    in the jobs' environment; `jobs` are the jobs that use it, `key` names it in answers."""

    key: str
    word: str
    script: str | None
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class PreflightRequest:
    cwd: str | None
    conda: str | None
    conda_hook: str | None
    launcher: LauncherName
    preconditions: tuple[PathCheck, ...] = ()
    venv: str | None = None
    commands: tuple[CommandCheck, ...] = ()
    path: str | None = None  # the manifest's env PATH, if it sets one: the jobs' PATH


@dataclass(frozen=True)
class PreflightFinding:
    host: str
    check: str  # connection | cwd | conda | venv | launcher | nvidia-smi | precondition |
    #             command | script
    ok: bool
    detail: str = ""
    job: str | None = None  # for a precondition finding; a command check's key


@runtime_checkable
class Host(Protocol):
    """A machine the engine can place jobs on."""

    name: str

    async def log_root(self, project: str, token: str) -> str:
        """Absolute directory on the host under which attempt directories are created."""
        ...

    async def probe(self, request: ProbeRequest) -> HostSnapshot: ...

    async def launch(self, request: LaunchRequest) -> None:
        """Start the attempt in a detached session; raise HostError if it could not start."""
        ...

    async def kill(self, session: str, attempt_dir: str, launcher: LauncherName,
                   reason: str = "", stop: Stop = PERSON_STOP) -> Stopped:
        """Stop the attempt as `stop` says (its signal to the job, its wrapper and session
        left up, SIGKILL after the grace), then its session (addressed exactly). With a
        `reason` (a person's kill), an attempt that wrote no exit record gets one, and its log
        a line saying why and with which signal. Returns the exit code and the end its records
        hold then, by the host's clock (None where there is no record, or a host that cannot
        tell)."""
        ...

    async def tail(self, attempt_dir: str, lines: int) -> list[str]: ...

    async def preflight(self, request: PreflightRequest) -> list[PreflightFinding]: ...

    async def close(self) -> None: ...
