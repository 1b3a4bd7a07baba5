"""A real RunContext for the engine's parts in unit tests: a ledger, a bus and a run directory on
a temp dir, hosts that are never reached (their probes are HostSnapshots the test builds), and a
clock the test moves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.host_record import HostLink, HostRecord
from eq_tui.engine.state.ledger import Ledger
from eq_tui.engine.state.store import RunDir
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.manifest.model import HostSpec, Manifest


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def context(tmp_path: Path, manifest: Manifest, jobs: Sequence[JobState] = (),
            clock: Clock | None = None) -> RunContext:
    """The context of an engine over `manifest`, its ledger holding `jobs`, one record per host
    of the manifest (`HostRecord.snapshot` is the test's to set)."""
    clock = clock or Clock()
    run_dir = RunDir(tmp_path)
    bus = Bus(manifest.project, run_dir, clock)
    ledger = Ledger(manifest, bus, clock, on_release=lambda *_: None,
                    output_pattern=lambda _spec: None)
    for job in jobs:
        ledger.jobs[job.id] = job
    hosts = {spec.name: record(spec) for spec in manifest.hosts}
    return RunContext(manifest=manifest, run_dir=run_dir, hosts=hosts, clock=clock, bus=bus,
                      ledger=ledger, token="t", created=0.0, started_at=0.0)


def record(spec: HostSpec) -> HostRecord:
    return HostRecord(spec.name, ShellHost(spec.name, LocalRunner()), spec, HostLink("up", 0.0))
