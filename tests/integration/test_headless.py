"""The --no-ui front end through the real binary: lines, JSON events, Ctrl-C, dry run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eq_tui.api.events import JobStateChanged
from eq_tui.cli.headless import format_event
from tests.support.engine_run import job, make_manifest, run_to_end, start_engine

pytestmark = pytest.mark.integration

MANIFEST = """\
project: headless
hosts: [{name: sim, simulate: {gpus: 2}}]
oom_retry: {delay: 0.2, max_attempts: 2}
jobs:
  - {id: ok, cmd: "fake-train --epochs 2 --epoch-seconds 0.1 --mem 1000"}
  - {id: oom, cmd: "fake-train --epochs 2 --epoch-seconds 0.1 --mem 1000 --oom-attempts 1"}
  - {id: bad, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --exit-code 5"}
"""
EQ = [sys.executable, "-m", "eq_tui"]


def test_status_line_format() -> None:
    event = JobStateChanged(project="p", at=0.0, job="j1", old="running", new="failed_oom",
                            host="box", gpus=(2,), attempt=1, failure_class="cuda_oom",
                            detail="torch.OutOfMemoryError: CUDA out of memory")
    line = format_event(event, with_project=False)
    assert line is not None
    assert "j1" in line and "box:2" in line and "running → failed_oom" in line
    assert "[cuda_oom]" in line and "(attempt 1)" in line


def test_json_events_and_exit_code(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    result = subprocess.run([*EQ, str(manifest), "--no-ui", "--json", "--poll", "0.2",
                             "--run-dir", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    changes = [(e["job"], e["old"], e["new"]) for e in events
               if e["type"] == "job_state_changed"]
    assert ("oom", "running", "failed_oom") in changes
    assert ("oom", "running", "completed") in changes
    assert ("bad", "running", "stuck") in changes
    assert events[-1]["type"] == "queue_finished" and events[-1]["exit_code"] == 1
    history = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").open()]
    assert [e for e in history if e["type"] == "job_state_changed"] == [
        e for e in events if e["type"] == "job_state_changed"]


def test_ctrl_c_leaves_jobs_running_and_exits_130(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.replace("--epochs 2 --epoch-seconds 0.1 --mem 1000\"}",
                                         "--epochs 40 --epoch-seconds 0.1 --mem 1000\"}", 1))
    run_dir = tmp_path / "run"
    engine = subprocess.Popen([*EQ, str(manifest), "--no-ui", "--poll", "0.2", "--run-dir",
                               str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    deadline = time.monotonic() + 60
    runs_file = run_dir / "sim" / "sim" / "runs.jsonl"
    while True:
        if runs_file.exists() and '"job": "ok"' in runs_file.read_text():
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine.send_signal(signal.SIGINT)
    out, _err = engine.communicate(timeout=30)
    assert engine.returncode == 130
    assert "jobs keep running" in out
    runs = [json.loads(line) for line in (run_dir / "sim" / "sim" / "runs.jsonl").open()]
    assert not [r for r in runs if r["job"] == "ok" and r["event"] == "end"]
    # the next run adopts the running job instead of launching it again
    resumed = subprocess.run([*EQ, str(manifest), "--no-ui", "--json", "--poll", "0.2",
                              "--run-dir", str(run_dir)], capture_output=True, text=True,
                             timeout=120)
    runs = [json.loads(line) for line in (run_dir / "sim" / "sim" / "runs.jsonl").open()]
    assert sum(1 for r in runs if r["job"] == "ok" and r["event"] == "start") == 1
    assert resumed.returncode == 1


def test_dry_run_prints_the_plan_and_launches_nothing(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    result = subprocess.run([*EQ, str(manifest), "--dry-run"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "3 jobs" in result.stdout and "sim:0" in result.stdout
    assert "fake-train" in result.stdout and "ok   sim: launcher" in result.stdout
    assert not (tmp_path / "experiment_queue").exists()


async def test_resume_reconciles_manifest_edits(tmp_path: Path) -> None:
    failing = "fake-train --exit-code 2 --epochs 1 --epoch-seconds 0.1"
    first = make_manifest(tmp_path, [job("keep"), job("fix", failing)])
    code, _run = await run_to_end(first, tmp_path / "run")
    assert code == 1
    edited = make_manifest(tmp_path, [job("keep"), job("fix"), job("new")])
    run = await start_engine(edited, tmp_path / "run", exit_when_done=False)
    try:
        # a stuck job whose command changed is retried by itself (the edit is the fix)
        await run.wait_for(lambda: run.status("new") == "completed"
                           and run.status("fix") == "completed")
        assert run.engine.jobs["fix"].cmd == edited.jobs[1].cmd
        assert len(run.engine.jobs["fix"].history) == 2
        assert "command changed since it was stuck" in \
            (tmp_path / "run" / "events.jsonl").read_text()
        assert len(run.engine.jobs["keep"].history) == 1  # completed: not run again
    finally:
        await run.stop()


async def test_a_summary_line_comes_every_period_with_the_counts_and_hosts(
        tmp_path: Path) -> None:
    import asyncio
    import io

    from eq_tui.cli.headless import SUMMARY_EVERY_S, Headless
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts

    assert SUMMARY_EVERY_S == 30.0  # the README's "a summary every 30 s"
    manifest = make_manifest(tmp_path, [job("long", "fake-train --epochs 100 --epoch-seconds "
                                                    "0.1 --mem 100")])
    run_dir = tmp_path / "run"
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir), poll=0.2)
    await engine.start()
    out = io.StringIO()
    clock = [engine.ctx.created + 125.0]  # elapsed counts from the run's creation
    front = Headless([engine], out=out, summary_every=0.2, clock=lambda: clock[0])
    task = asyncio.create_task(front.run(lambda: asyncio.gather(engine.run())))

    def summaries() -> list[str]:
        return [line for line in out.getvalue().splitlines() if re.search(r" jobs?: ", line)]

    deadline = asyncio.get_running_loop().time() + 30
    while not any("running 1" in line for line in summaries()[1:]):
        assert asyncio.get_running_loop().time() < deadline, out.getvalue()
        await asyncio.sleep(0.05)
    line = next(line for line in summaries() if "running 1" in line)
    assert "[t] 1 job: running 1 | hosts sim:up | 2m05s" in line
    await engine.command("kill", ["long"])
    front.interrupt()
    assert await asyncio.wait_for(task, 60) == 130


def test_what_a_person_changed_gets_a_line() -> None:
    from eq_tui.api.events import JobAdded, JobEdited, JobRetired
    from eq_tui.cli.headless import format_event

    edited = format_event(JobEdited(project="p", at=0.0, job="s1", old_cmd="a --lr 1",
                                    new_cmd="a --lr 2", by="shell me@box", requeued=True),
                          with_project=False)
    assert edited is not None and "edited: `a --lr 1` → `a --lr 2`; it runs again" in edited
    assert "(by shell me@box)" in edited
    added = format_event(JobAdded(project="p", at=0.0, job="s1c", phase="main", cmd="a",
                                  origin="clone", source="s1"), with_project=False)
    assert added is not None and "added (clone of s1) to main" in added
    retired = format_event(JobRetired(project="p", at=0.0, job="s9"), with_project=False)
    assert retired is not None and "retired by a reload" in retired
