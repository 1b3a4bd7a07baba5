"""A metric never seen is said, on real sessions: a sweep whose goal names `val_accuracy` while
fake-train prints `val_acc` gets an alert (the `--no-ui` line), and `eq-tui status`, `eq-tui
results` and summary.md name the metric, the jobs and `val_acc` read instead; an early_stop
metric never printed is said while the jobs still run; a sweep whose metric is printed says
nothing of the kind."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from eq_tui.api.events import Alert, JobStateChanged
from eq_tui.cli.headless import format_event
from eq_tui.manifest.model import EarlyStopSpec, JobSpec, PhaseSpec, ResultsSpec
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts, start_engine

pytestmark = pytest.mark.asyncio

EQ = [sys.executable, "-m", "eq_tui"]
NEVER = "never read from"


def sweep(epochs: int = 3, epoch_s: float = 0.1) -> list[JobSpec]:
    return [job(f"lr{lr}_s{seed}", f"fake-train --lr {lr} --seed {seed} --epochs {epochs} "
                                   f"--epoch-seconds {epoch_s} --mem 1000",
                params=(("lr", lr), ("seed", seed)))
            for lr in ("0.1", "0.03") for seed in ("1", "2")]


def phases(goal: str, early_stop: EarlyStopSpec | None = None) -> tuple[PhaseSpec, ...]:
    return (PhaseSpec(name="main", results=ResultsSpec(goal=((goal, "max"),),
                                                       early_stop=early_stop)),)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=60, check=False)


def unseen_alerts(events: list) -> list[Alert]:
    return [e for e in events if isinstance(e, Alert) and NEVER in e.message]


async def test_a_goal_metric_never_printed_is_said_everywhere(tmp_path: Path) -> None:
    jobs = sweep()
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 4)),
                             phases=phases("val_accuracy"))
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=90)
    assert code == 0
    ids = sorted(j.id for j in jobs)
    # the alert (and so the --no-ui line): the metric, its role, the jobs, what was read
    alerts = unseen_alerts(run.events)
    assert alerts, [e for e in run.events if isinstance(e, Alert)]
    counts = [int(a.message.split(NEVER)[1].split()[0]) for a in alerts]
    # said when found, again only once its jobs have doubled: no alert a tick
    assert all(b >= 2 * a for a, b in itertools.pairwise(counts)), counts
    for alert in alerts:
        assert alert.message.startswith("metric 'val_accuracy' (goal) never read from ")
        assert "of phase main (" in alert.message
        named = alert.message.split("(")[2].split(")")[0].split(", ")
        assert len(named) == int(alert.message.split(NEVER)[1].split()[0])
        assert set(named) <= set(ids)
        assert "read instead: loss, val_acc — is it 'val_acc'? Check the name" in alert.message
    line = format_event(alerts[-1], with_project=False)
    assert line is not None and "WARNING: metric 'val_accuracy' (goal) never read" in line
    # summary.md
    summary = (run_dir / "summary.md").read_text()
    section = summary[summary.index("## Metrics never read"):]
    assert "metric 'val_accuracy' (goal) never read from 4 jobs of phase main" in section
    assert "val_acc" in section and all(job_id in section for job_id in ids)
    # eq-tui status, text and JSON
    status = cli("status", str(run_dir))
    assert status.returncode == 0, status.stderr
    said = status.stdout[status.stdout.index("metrics never read:"):]
    assert "metric 'val_accuracy' (goal) never read from 4 jobs" in said and "val_acc" in said
    data = json.loads(cli("status", str(run_dir), "--json").stdout)
    [finding] = data["metrics_never_read"]
    assert finding["metric"] == "val_accuracy" and sorted(finding["jobs"]) == ids
    assert "val_acc" in finding["instead"] and finding["near"] == "val_acc"
    # eq-tui results: below the table, and under a key in JSON
    table = cli("results", str(run_dir))
    assert table.returncode == 0, table.stderr
    assert "no best marked: no job's metrics include the goal's (val_accuracy)" in table.stdout
    below = table.stdout[table.stdout.index("metric 'val_accuracy'"):]
    assert "never read from 4 jobs" in below and "val_acc" in below
    data = json.loads(cli("results", str(run_dir), "--format", "json").stdout)
    [finding] = data["metrics_never_read"]
    assert sorted(finding["jobs"]) == ids and finding["role"] == "goal"
    csv = cli("results", str(run_dir), "--format", "csv")
    assert NEVER not in csv.stdout and NEVER in csv.stderr


async def test_an_early_stop_metric_never_printed_is_said_while_the_jobs_run(
        tmp_path: Path) -> None:
    """early_stop on `val_accuracy`: nothing is ever pruned, and that is said once the jobs are
    past half their run, before any of them completes."""
    early = EarlyStopSpec(metric="val_accuracy", goal="max", grace=1)
    manifest = make_manifest(tmp_path, sweep(epochs=10, epoch_s=0.5),
                             hosts=sim_hosts(("sim", 4)), phases=phases("val_acc", early))
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: bool(unseen_alerts(run.events)), timeout=60)
        first = unseen_alerts(run.events)[0]
        before = run.events[:run.events.index(first)]
        assert not [e for e in before if isinstance(e, JobStateChanged)
                    and e.new == "completed"]
        assert first.message.startswith("metric 'val_accuracy' (early_stop) never read from ")
        assert "read instead: " in first.message and "val_acc" in first.message
        assert not [j for j in run.engine.jobs.values() if str(j.status) == "pruned"]
    finally:
        await run.stop()


async def test_a_sweep_whose_metrics_are_printed_says_nothing(tmp_path: Path) -> None:
    early = EarlyStopSpec(metric="val_acc", goal="max", grace=1)
    manifest = make_manifest(tmp_path, sweep(epochs=4, epoch_s=0.2),
                             hosts=sim_hosts(("sim", 4)), phases=phases("val_acc", early))
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=90)
    assert code == 0
    assert unseen_alerts(run.events) == []
    assert "never read" not in (run_dir / "summary.md").read_text()
    assert "never read" not in cli("status", str(run_dir)).stdout
    results = cli("results", str(run_dir))
    assert "val_acc" in results.stdout and NEVER not in results.stdout
    assert json.loads(cli("results", str(run_dir), "--format", "json").stdout)[
        "metrics_never_read"] == []
