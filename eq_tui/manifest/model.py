"""The validated, expanded manifest: what the engine runs. Plain frozen data, no I/O."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Literal

Launcher = Literal["screen", "tmux"]
MemMib = int | Literal["auto"]  # a job's peak GPU memory per GPU; "auto": learned from siblings
Waves = Literal["rolling", "strict"]
OnDependencyFailure = Literal["block", "run"]


@dataclass(frozen=True)
class SimulateSpec:
    """Simulated GPUs on this machine (the sim's nvidia-smi and fake training jobs)."""

    gpus: int = 4
    memory_mib: int = 24576
    model: str = "NVIDIA Simulated GPU"
    linger_s: float = 0.0  # memory stays "used" this long after a fake job exits


@dataclass(frozen=True)
class SlurmSpec:
    ssh: str | None = None  # login node; None: the local Slurm client
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    sbatch_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostSpec:
    name: str
    ssh: str | None = None  # ssh alias or [user@]host[:port]; None with no simulate/slurm: local
    gpus: tuple[int, ...] | None = None  # None means "all"
    max_parallel: int = 8
    # set in the manifest: else jobs placed by memory are capped only by memory and
    # max_jobs_per_gpu (8 would keep a packed 8-GPU host to one job per GPU)
    max_parallel_given: bool = False
    simulate: SimulateSpec | None = None
    slurm: SlurmSpec | None = None
    log_dir: str | None = None  # where attempt logs live on the host (default chosen by the host)
    max_jobs_per_gpu: int | None = None  # None: only memory limits how many jobs share a GPU
    max_cpu_jobs: int | None = None  # CPU-only jobs at once; None: half the host's cores
    # where the engines on the host keep their GPU claims (None: $EQ_TUI_CLAIMS there, else
    # /tmp/eq-tui-claims)
    claims_dir: str | None = None
    # the lab's rules file there (None: $EQ_TUI_RULES there, else /etc/eq-tui/rules.yaml)
    rules: str | None = None

    @property
    def kind(self) -> Literal["local", "ssh", "sim", "slurm"]:
        if self.slurm is not None:
            return "slurm"
        if self.simulate is not None:
            return "sim"
        if self.ssh is not None:
            return "ssh"
        return "local"


@dataclass(frozen=True)
class EnvVar:
    value: str
    secret: bool = False  # passed to the job, never written to disk or shown
    from_env: str | None = None  # a secret read from the environment of the eq-tui command
    from_file: str | None = None  # a secret read from this file, as written (~, relative)
    provided: bool = True  # False: a from_env/from_file secret whose value this process lacks
    line: int | None = field(default=None, compare=False)  # where the manifest names it


@dataclass(frozen=True)
class Precondition:
    type: Literal["checkpoint_exists"]
    path: str  # relative to cwd on the host, or absolute; may be a glob


@dataclass(frozen=True)
class OomRetry:
    delay: float = 120.0
    max_attempts: int = 3


Goal = Literal["max", "min"]


@dataclass(frozen=True)
class MetricsSpec:
    """Where a job's numbers are (`metrics:`); paths relative to the job's cwd, launch-time
    variables still in. Without one, or without a file named, the conventional files, what the
    stacks write in the cwd while the job runs and the log are looked at."""

    json: str | None = None
    jsonl: str | None = None
    csv: str | None = None
    log: bool = False
    pattern: str | None = None  # a regex with named groups, over log lines (implies log)
    hf_state: str | None = None  # HF Trainer's trainer_state.json; a glob: the newest written
    tensorboard: str | None = None  # an event file, or a directory: its newest written

    def files(self) -> tuple[str, ...]:
        """The paths it names."""
        return tuple(path for key in METRICS_FILE_KEYS if (path := getattr(self, key)))


METRICS_FILE_KEYS = ("json", "jsonl", "csv", "hf_state", "tensorboard")


@dataclass(frozen=True)
class EarlyStopSpec:
    """`early_stop:` (top level or phase): stop the jobs that are losing, as their reports of
    `metric` arrive. `rule` asha: at the report counts grace, grace*eta, grace*eta^2, ... keep
    the best 1/eta of the configurations that reached it; median: from report `grace` on, stop
    a configuration below the median of the others at the same report; hyperband (a search's
    trials only): Optuna's HyperbandPruner. A search's trials are judged by Optuna's pruner for
    the rule (runfiles/search_pruners.py), other jobs by eq-tui's own (decide/pruning.py)."""

    metric: str
    goal: Goal
    rule: Literal["asha", "median", "hyperband"] = "asha"
    grace: int = 1
    eta: int = 3


@dataclass(frozen=True)
class ResultsSpec:
    """How results are read and grouped, per phase (the top level's inherited): which way is
    better per metric, the seed-like grid key averaged over, the command run when done."""

    goal: tuple[tuple[str, Goal], ...] = ()
    group_over: str = "seed"
    on_complete: str | None = None
    early_stop: EarlyStopSpec | None = None  # None: every job runs to its end


@dataclass(frozen=True)
class CrashGuard:
    """Stop launching a phase once `after` of its jobs in a row failed the same way within
    `within` seconds of starting (enabled=False: never)."""

    enabled: bool = True
    after: int = 3
    within: float = 60.0


@dataclass(frozen=True)
class AddedJobDefaults:
    """What a job added at run time (`eq-tui add --phase P`) takes from its phase, as a job
    written there would: the phase's (or the top level's) per-job keys. A key whose text needs
    a grid variable cannot be filled in for a job with no grid point: it is named in
    `left_out` instead, with the variable."""

    output_check: str | None = None
    preconditions: tuple[Precondition, ...] = ()
    metrics: MetricsSpec | None = None
    stall_after: float | None = None
    on_stall: str = "alert"
    gpus_per_job: int = 1
    mem_mib: int | Literal["auto"] | None = None
    exclusive: bool = False
    priority: int = 0
    preempt: bool | Literal["force"] = False
    max_preemptions: int = 3
    retry_lost: int = 1
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchParam:
    """One name of a search's space: a range (`low`..`high`, `log`, `step`; `integer` when
    the bounds and step are whole numbers) or `choices` (the values as written)."""

    name: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchSpec:
    """A phase's `search:`: Optuna asks each trial's point of `space`; every trial runs
    `trial_job` (the template, the space's names and `${trial}` left as markers) once per
    `grid` point, and the mean of their `metric` is told."""

    space: tuple[SearchParam, ...]
    metric: str
    goal: Goal
    trial_job: JobSpec
    trials: int | None = None
    gpu_hours: float | None = None
    sampler: str = "tpe"
    seed: int | None = None
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class PhaseSpec:
    name: str
    depends_on: tuple[str, ...] = ()
    on_dependency_failure: OnDependencyFailure = "block"
    results: ResultsSpec = field(default_factory=ResultsSpec)
    added_jobs: AddedJobDefaults = field(default_factory=AddedJobDefaults)
    search: SearchSpec | None = None  # trials asked of Optuna at run time


@dataclass(frozen=True)
class CheckpointSpec:
    """A job's checkpoint contract: where it saves (`path`, a glob relative to its working
    directory, rendered for the job) and how it resumes (`resume`, the arguments appended to
    its command on a restart when a checkpoint exists; `{checkpoint}` is the newest, quoted)."""

    path: str
    resume: str
    signal: str = "TERM"  # what a preempted or drained job gets first, to save
    grace: float = 60.0  # seconds from that signal to SIGKILL


@dataclass(frozen=True)
class JobSpec:
    id: str
    phase: str
    cmd: str  # `${GPU}` may remain; substituted at launch time
    output_check: str | None = None
    preconditions: tuple[Precondition, ...] = ()
    gpus_per_job: int = 1
    metrics: MetricsSpec | None = None  # None: look for the conventional files and the log
    params: tuple[tuple[str, str], ...] = ()  # its grid point, for grouping results
    priority: int = 0  # higher launches first; ties in manifest order
    stall_after: float | None = None  # seconds; None: the default window; 0: never stalled
    on_stall: str = "alert"  # alert | restart | kill
    mem_mib: int | Literal["auto"] | None = None  # None: not given, its GPUs are its own
    exclusive: bool = False  # wants its GPUs alone even when others would fit beside it
    family: str = ""  # jobs that learn memory from each other: "<phase>/template" or the phase
    checkpoint: CheckpointSpec | None = None  # None: every restart starts from scratch
    preempt: bool | Literal["force"] = False  # may stop a lower-priority job to start
    max_preemptions: int = 3  # how often this job may itself be preempted
    retry_lost: int = 1  # requeues after its session vanished with its host

    def __post_init__(self) -> None:
        if not self.family:  # specs built in code (tests, run-time adds) get their phase's
            object.__setattr__(self, "family", self.phase)


@dataclass(frozen=True)
class NotifySpec:
    """One notification target and the events it wants: `command` (run where the engine runs,
    the event as JSON on stdin), `url`, or `url_env` (the name of the environment variable
    holding a URL with a token: the manifest never holds the token)."""

    on: tuple[str, ...]
    command: str | None = None
    url: str | None = None
    url_env: str | None = None

    @property
    def label(self) -> str:
        if self.command is not None:
            return f"command {self.command[:40]!r}"
        return f"url ${self.url_env}" if self.url_env else f"url {self.url}"


DEFAULT_PHASE = "main"


@dataclass(frozen=True)
class Manifest:
    project: str
    source: str  # path of the manifest file it came from
    cwd: str | None = None
    conda: str | None = None
    conda_hook: str | None = None
    venv: str | None = None  # a virtualenv directory activated for every job
    env: dict[str, EnvVar] = field(default_factory=dict)
    hosts: tuple[HostSpec, ...] = (HostSpec(name="local"),)
    gpu_free_threshold_mib: int = 500
    gpus_per_job: int = 1
    mem_mib: int | Literal["auto"] | None = None  # the top level's (a job added at run time's)
    exclusive: bool = False  # the top level's
    gpu_margin_mib: int = 1024  # memory kept free on every shared GPU
    launcher: Launcher = "screen"
    waves: Waves = "rolling"
    oom_retry: OomRetry = field(default_factory=OomRetry)
    poll: float | None = None
    stale_grace_s: float = 5.0
    retry_delay_s: float = 30.0  # for port_in_use and other "retry after a delay" classes
    crash_guard: CrashGuard = field(default_factory=CrashGuard)
    phases: tuple[PhaseSpec, ...] = (PhaseSpec(name=DEFAULT_PHASE),)
    jobs: tuple[JobSpec, ...] = ()
    results: ResultsSpec = field(default_factory=ResultsSpec)  # the top level's
    notify: tuple[NotifySpec, ...] = ()

    @cached_property
    def job_specs(self) -> dict[str, JobSpec]:
        """Job specs by id (built once: a manifest never changes)."""
        return {spec.id: spec for spec in self.jobs}

    @cached_property
    def host_specs(self) -> dict[str, HostSpec]:
        return {spec.name: spec for spec in self.hosts}

    def phase(self, name: str) -> PhaseSpec:
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """The expanded manifest for manifest.json, with secret env values redacted."""
        data = asdict(self)
        data["env"] = {name: _env_json(var) for name, var in self.env.items()}
        return data


def _env_json(var: EnvVar) -> dict[str, Any]:
    if var.from_env is not None:
        return {"from_env": var.from_env, "secret": True}
    if var.from_file is not None:
        return {"from_file": var.from_file, "secret": True}
    return {"value": "<secret>" if var.secret else var.value, "secret": var.secret}
