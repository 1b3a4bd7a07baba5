"""What every part of the engine shares: the manifest, the hosts, the clock, the bus, the
ledger, and the run's own fields that are not jobs (token, pause, quarantine)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from eq_tui.api.model import JobState
from eq_tui.engine.decide.crash_guard import CrashGuard
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.command_log import CommandLog
from eq_tui.engine.state.early_stop_edits import EarlyStopEdits
from eq_tui.engine.state.host_record import HostRecord
from eq_tui.engine.state.ledger import Ledger
from eq_tui.engine.state.search_edits import SearchEdits
from eq_tui.engine.state.store import RunDir
from eq_tui.hosts.factory import job_cwd
from eq_tui.manifest.launchvars import substitute
from eq_tui.manifest.model import JobSpec, Manifest

_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+")


def shell_path(path: str) -> str:
    """A path for command text: bare when it needs no quoting (it may sit inside quotes the
    manifest's args rendering added), quoted otherwise."""
    return path if _SAFE_PATH.fullmatch(path) else shlex.quote(path)


def output_pattern(spec: JobSpec, run_dir: str) -> str | None:
    """The job's output_check glob with its launch-time variables filled in."""
    if not spec.output_check:
        return None
    return substitute(spec.output_check, run_dir=run_dir, job_id=spec.id)


@dataclass
class RunContext:
    manifest: Manifest
    run_dir: RunDir
    hosts: dict[str, HostRecord]
    clock: Callable[[], float]
    bus: Bus
    ledger: Ledger
    token: str
    created: float
    started_at: float
    paused: bool = False
    # why the waiting jobs with no reason of their own wait (the last full tick's): the queue's
    waiting_reason: str = ""
    commands: CommandLog = field(default_factory=CommandLog)
    # a person's early_stop settings for the rest of the run (kept in the state file)
    early_stop_edits: EarlyStopEdits = field(default_factory=EarlyStopEdits)
    # a person's changes to searches: amounts, holds (kept in the state file)
    search_edits: SearchEdits = field(default_factory=SearchEdits)
    crash_guard: CrashGuard = field(init=False)
    # an engine started for a person's command (a shell verb on a run with no engine running):
    # until that command comes, or this time (clock) passes, it launches nothing and a queue
    # that has finished does not end it
    awaiting_command_until: float | None = None

    def __post_init__(self) -> None:
        self.crash_guard = CrashGuard(self.manifest.crash_guard, self.manifest.project,
                                      self.bus, self.clock, group_over=self.group_over,
                                      phase_jobs=self.phase_jobs,
                                      run_dir=str(self.run_dir.path))

    def group_over(self, phase: str) -> str:
        """The grid key a phase's seeds differ in (its results' `group_over`)."""
        spec = next((p for p in self.manifest.phases if p.name == phase), None)
        return (spec.results if spec is not None else self.manifest.results).group_over

    def phase_jobs(self, phase: str) -> list[JobState]:
        return [job for job in self.ledger.jobs.values() if job.phase == phase]

    def replace_manifest(self, manifest: Manifest) -> None:
        """The one place the run's manifest is replaced (secrets handed over, early stopping
        edited or reloaded): every part reads it from here, never keeps a copy."""
        self.manifest = manifest

    def awaiting_command(self) -> bool:
        until = self.awaiting_command_until
        if until is not None and self.clock() >= until:
            self.awaiting_command_until = until = None
        return until is not None

    @property
    def project(self) -> str:
        return self.manifest.project

    def run_dir_value(self) -> str:
        return str(self.run_dir.path.resolve())

    def cwd_for(self, host: str) -> str | None:
        """Where a job runs on this host (the host factory knows each kind's default)."""
        record = self.hosts.get(host)
        if record is None or record.spec is None:
            return self.manifest.cwd
        return job_cwd(record.spec, self.manifest)

    def output_pattern(self, spec: JobSpec) -> str | None:
        return output_pattern(spec, self.run_dir_value())

    def stopped_hosts(self) -> dict[str, str]:
        return {name: r.stopped for name, r in self.hosts.items() if r.stopped is not None}
