"""What a person can ask of an engine: one typed command per verb. The shell verbs
(cli/queue_verbs.py), the UI (tui/sender.py, tui/living.py) and the engine's handlers
(engine/commands/) all speak these; on the control socket a command travels as its name, the
ids it acts on and its arguments (`wire()`), and `from_wire` makes it typed again.

The fields hold what the sender gave: the handlers judge the values (a priority that is not a
whole number, an id that is taken) and say why in the command's result, so a client in another
process gets the same answers as one in the engine's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


class CommandError(ValueError):
    """A request that is no command: an unknown name, ids that are not strings, an argument
    the command does not take."""


@dataclass(frozen=True)
class Command:
    name: ClassVar[str]
    by: str = field(default="", kw_only=True)  # who sends it ("ui", a user name), for records

    def targets(self) -> list[str]:
        """What it acts on, as sent where job ids go (GPUs for release-gpu)."""
        return []

    def arguments(self) -> dict[str, Any]:
        """Its arguments beyond the ids, as sent on the wire (unset ones left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in _NOT_ARGUMENTS:
                continue
            value = getattr(self, f.name)
            if value is None or (f.name in _DROP_WHEN_EMPTY and not value):
                continue
            out[_WIRE_NAMES.get(f.name, f.name)] = dict(value) if f.name in _MAPPINGS else value
        return out

    def wire(self) -> tuple[str, list[str], dict[str, Any]]:
        return self.name, self.targets(), self.arguments()


@dataclass(frozen=True)
class OnJobs(Command):
    """A command on jobs named by id (each answered ok or why not)."""

    job_ids: tuple[str, ...] = ()

    def targets(self) -> list[str]:
        return list(self.job_ids)


@dataclass(frozen=True)
class Kill(OnJobs):
    """`grace`: seconds the job has after its SIGTERM before SIGKILL (None: the host's short
    default), for a job that saves its work first."""

    name: ClassVar[str] = "kill"
    grace: float | None = None


@dataclass(frozen=True)
class Retry(OnJobs):
    name: ClassVar[str] = "retry"


@dataclass(frozen=True)
class Requeue(OnJobs):
    name: ClassVar[str] = "requeue"


@dataclass(frozen=True)
class Hold(OnJobs):
    """Waiting jobs held; or, with `phase` (and no jobs), that phase's search asks no new trial
    until the phase is released (its trials out run to their end and are told)."""

    name: ClassVar[str] = "hold"
    phase: str | None = None


@dataclass(frozen=True)
class Release(OnJobs):
    """Held jobs back to waiting; or, with `phase` (and no jobs), the crash guard's hold on
    that phase lifted (the rest of it launches as it is) and a person's hold on its search
    (it asks trials again)."""

    name: ClassVar[str] = "release"
    phase: str | None = None


@dataclass(frozen=True)
class SetPriority(OnJobs):
    """`priority` sets it, `delta` moves it (the UI's + and -); exactly one of them."""

    name: ClassVar[str] = "priority"
    priority: Any = None
    delta: Any = None


@dataclass(frozen=True)
class Edit(OnJobs):
    """A new command (`cmd`), or the old one with some `--key value`s changed (`sets`: each a
    flag the command has) and new flags added (`add_flags`)."""

    name: ClassVar[str] = "edit"
    cmd: Any = None
    sets: Mapping[str, Any] = field(default_factory=dict)
    add_flags: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Clone(Command):
    name: ClassVar[str] = "clone"
    job: str = ""
    new_id: Any = None  # default: JOB-cloneN
    cmd: Any = None
    sets: Mapping[str, Any] = field(default_factory=dict)
    add_flags: Mapping[str, Any] = field(default_factory=dict)
    priority: Any = None
    mem_mib: Any = None
    exclusive: Any = None

    def targets(self) -> list[str]:
        return [self.job]


@dataclass(frozen=True)
class Add(Command):
    name: ClassVar[str] = "add"
    id: Any = None
    cmd: Any = None
    phase: Any = None
    gpus_per_job: Any = None
    mem_mib: Any = None  # MiB, or "auto"
    exclusive: Any = None
    priority: Any = None
    output_check: Any = None
    preempt: Any = None  # true, false or "force"


@dataclass(frozen=True)
class Reload(Command):
    """`force`: the file's definitions also over what a person changed (edits, priorities,
    holds on jobs gone from the file)."""

    name: ClassVar[str] = "reload"
    dry_run: bool = False
    force: bool = False


@dataclass(frozen=True)
class SetEarlyStop(Command):
    """Early stopping for the rest of the run (`eq-tui edit RUN_DIR --early-stop ...`):
    `state` "off", or "on" (the manifest's setting back), and/or a new `eta` or `grace`; for
    `phase`, or (None) every phase that has early_stop."""

    name: ClassVar[str] = "early-stop"
    phase: Any = None
    state: Any = None  # "off" | "on" | None
    eta: Any = None
    grace: Any = None


@dataclass(frozen=True)
class SetSearch(Command):
    """A search's amounts for the rest of the run (`eq-tui edit RUN_DIR --search trials=N`):
    `trials` and/or `gpu_hours` (its budget), for `phase`, or (None) the only phase that has a
    search."""

    name: ClassVar[str] = "search"
    phase: Any = None
    trials: Any = None
    gpu_hours: Any = None


@dataclass(frozen=True)
class Pause(Command):
    name: ClassVar[str] = "pause"


@dataclass(frozen=True)
class Resume(Command):
    name: ClassVar[str] = "resume"


@dataclass(frozen=True)
class Shutdown(Command):
    """Stop the engine; its jobs keep running in their sessions."""

    name: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class ReleaseGpu(Command):
    """Give quarantined GPUs back, each `HOST:GPU`."""

    name: ClassVar[str] = "release-gpu"
    gpus: tuple[str, ...] = ()

    def targets(self) -> list[str]:
        return list(self.gpus)


@dataclass(frozen=True)
class Drain(Command):
    """`eq-tui drain RUN_DIR HOST`: nothing new launches on the host (or only on `only_gpus`
    of it) from the moment the answer comes; `now`: its running jobs there are stopped with
    `grace` seconds to save (None: the default) and go back to the queue, to resume elsewhere."""

    name: ClassVar[str] = "drain"
    host: str = ""
    only_gpus: Any = None  # GPU indexes; None: the whole host
    now: bool = False
    grace: Any = None

    def targets(self) -> list[str]:
        return [self.host]


@dataclass(frozen=True)
class Undrain(Command):
    """The host given back: launches there again."""

    name: ClassVar[str] = "undrain"
    host: str = ""

    def targets(self) -> list[str]:
        return [self.host]


KINDS: dict[str, type[Command]] = {kind.name: kind for kind in (
    Kill, Retry, Requeue, Hold, Release, SetPriority, Edit, Clone, Add, Reload, SetEarlyStop,
    SetSearch, Pause, Resume, Shutdown, ReleaseGpu, Drain, Undrain)}
_NOT_ARGUMENTS = frozenset({"job_ids", "job", "gpus", "host"})
_MAPPINGS = frozenset({"sets", "add_flags"})
_DROP_WHEN_EMPTY = frozenset({*_MAPPINGS, "by"})
_WIRE_NAMES = {"sets": "set", "add_flags": "add_flag", "new_id": "id"}
_FIELD_NAMES = {wire: name for name, wire in _WIRE_NAMES.items()}


def from_wire(name: str, targets: Sequence[Any] | None = None,
              args: Mapping[str, Any] | None = None) -> Command:
    """The typed command a request names; CommandError saying what is wrong otherwise."""
    kind = KINDS.get(str(name))
    if kind is None:
        raise CommandError(f"unknown command {name!r}")
    ids = list(targets or [])
    if not all(isinstance(one, str) for one in ids):
        raise CommandError(f"{name}: ids must be strings")
    args = dict(args or {})
    known = {f.name for f in fields(kind)} - _NOT_ARGUMENTS
    given: dict[str, Any] = {}
    for key, value in args.items():
        field_name = _FIELD_NAMES.get(key, key)
        if field_name not in known:
            field_name = key  # Add's own `id`
        if field_name not in known:
            raise CommandError(f"{name} takes no argument {key!r}")
        given[field_name] = value
    for key in _MAPPINGS & set(given):
        if not isinstance(given[key], Mapping):
            raise CommandError(f"{name}: '{_WIRE_NAMES[key]}' must map keys to values")
    if "by" in given:
        given["by"] = str(given["by"] or "")
    if issubclass(kind, OnJobs):
        return kind(job_ids=tuple(ids), **given)
    if kind is Clone:
        if len(ids) != 1:
            raise CommandError("clone takes one job id")
        return Clone(job=ids[0], **given)
    if kind is ReleaseGpu:
        return ReleaseGpu(gpus=tuple(ids), **given)
    if kind in (Drain, Undrain):
        if len(ids) != 1:
            raise CommandError(f"{name} takes one host")
        return kind(host=ids[0], **given)
    if ids:
        raise CommandError(f"{name} takes no ids")
    return kind(**given)
