"""Early stopping across an engine restart and a reload: real sessions on the simulator, the
reports checked against what each job's log really printed."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.commands import Pause, Reload, Resume, SetEarlyStop
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest import load_manifest
from eq_tui.sim.state import read_runs, run_intervals
from tests.support.engine_run import start_engine
from tests.support.ground_truth import exits, launches

pytestmark = pytest.mark.asyncio

MANIFEST = """\
project: es
hosts: [{{name: sim, simulate: {{gpus: {gpus}}}}}]
goal: {{val_acc: max}}
{early_stop}
grid: {{lr: [{lrs}], seed: [1]}}
template:
  id: "lr${{lr}}_s${{seed}}"
  cmd: "fake-train --lr ${{lr}} --seed ${{seed}} --epochs {epochs} --epoch-seconds {epoch_s}"
"""


def write(path: Path, *, gpus: int = 2, lrs: str = "0.03, 3, 0.01, 1, 0.3, 0.1",
          epochs: int = 9, epoch_s: float = 0.5,
          early_stop: str = "early_stop: {metric: val_acc, eta: 3, grace: 1}") -> Path:
    path.write_text(MANIFEST.format(gpus=gpus, lrs=lrs, epochs=epochs, epoch_s=epoch_s,
                                    early_stop=early_stop))
    return path


def printed(log: str) -> list[float]:
    """The val_acc values the job's log really holds, in order."""
    text = Path(log).read_text(errors="replace")
    return [float(x) for x in re.findall(r"val_acc=([0-9.]+)", text)]


async def test_reports_and_rungs_survive_an_engine_restart(tmp_path: Path) -> None:
    manifest = load_manifest(str(write(tmp_path / "eq.yaml")))
    run_dir = tmp_path / "run"
    first = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        await first.wait_for(lambda: any(len(j.reports) >= 2 for j in first.engine.jobs.values()))
    finally:
        await first.stop()
    saved = {j["id"]: j["reports"] for j in first.state["jobs"]}
    assert any(saved.values())
    second = await start_engine(manifest, run_dir)
    assert second.task is not None
    assert await second.task == 0
    jobs = second.engine.jobs
    for key, job in jobs.items():
        assert job.reports[:len(saved[key])] == saved[key], key  # nothing lost or doubled
        assert job.reports == printed(job.log or "")[:len(job.reports)], key
        if str(job.status) == "pruned":
            step = int(re.match(r"pruned at report (\d+)", job.reason or "").group(1))  # type: ignore[union-attr]
            assert len(job.reports) >= step
    assert {str(j.status) for j in jobs.values()} <= {"completed", "pruned"}
    assert str(jobs["lr0.03_s1"].status) == "completed"
    # never launched twice: the restart adopted the running sessions
    assert set(launches([sim_state_dir(run_dir, "sim")]).values()) == {1}


async def test_a_reload_turns_early_stopping_off_for_the_rest_of_the_run(
        tmp_path: Path) -> None:
    path = write(tmp_path / "eq.yaml", gpus=1, lrs="0.03, 3, 1, 0.3", epochs=4, epoch_s=0.4)
    run = await start_engine(load_manifest(str(path)), tmp_path / "run")
    try:
        await run.wait_for(lambda: any(str(j.status) == "pruned"
                                       for j in run.engine.jobs.values()))
        write(path, gpus=1, lrs="0.03, 3, 1, 0.3", epochs=4, epoch_s=0.4, early_stop="")
        answer = await run.engine.send(Reload())
        assert answer["ok"], answer
        assert answer["detail"]["early_stop"] == {"main": "off"}
        assert "phases" not in answer["detail"]["not_applied"]
        assert run.task is not None
        assert await run.task == 0
    finally:
        if run.task is not None and not run.task.done():
            await run.stop()
    statuses = [str(j.status) for j in run.engine.jobs.values()]
    assert statuses.count("pruned") == 1, statuses


async def shell(*args: str) -> tuple[int, str]:
    """`eq-tui ARGS` in its own process, as a person types it (its control socket client)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eq_tui", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_edit_turns_early_stopping_off_from_the_shell_and_a_restart_keeps_it_off(
        tmp_path: Path) -> None:
    # one GPU, one job at a time: with it on, the worse ones after the first are pruned
    lrs = "0.03, 3, 1, 0.3, 0.1"
    path = write(tmp_path / "eq.yaml", gpus=1, lrs=lrs, epochs=4, epoch_s=0.4)
    manifest = load_manifest(str(path))
    run_dir = tmp_path / "run"
    first = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        await first.wait_for(lambda: any(str(j.status) == "pruned"
                                         for j in first.engine.jobs.values()))
        await first.engine.send(Pause())  # the rest waits while the person types
        code, out = await shell("edit", str(run_dir), "--early-stop", "off", "--no-start")
        assert code == 0, out
        assert "edit phase main: done" in out
        assert first.engine.manifest.phase("main").results.early_stop is None
    finally:
        await first.stop()
    edited_at = next(e["at"] for e in events(run_dir) if "early_stop is now off"
                     in str(e.get("message")))
    # the engine starts over the run from the same file, which still says early_stop: the
    # person's setting holds for the rest of the run
    second = await start_engine(manifest, run_dir)
    await second.engine.send(Resume())
    assert second.task is not None
    assert await second.task == 0
    assert [e for e in events(run_dir) if e.get("type") == "job_pruned"
            and e["at"] > edited_at] == []
    # the hosts' own records: every job that started after the edit ran to its end
    after = {r.job for r in run_intervals(read_runs(sim_state_dir(run_dir, "sim")))
             if r.start > edited_at}
    ended = exits([sim_state_dir(run_dir, "sim")])
    assert len(after) >= 2 and all(ended[job][-1] == 0 for job in after), (after, ended)
    assert {str(second.engine.jobs[job].status) for job in after} == {"completed"}
    assert set(launches([sim_state_dir(run_dir, "sim")]).values()) == {1}


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


async def test_edit_changes_eta_and_grace_and_says_why_it_cannot(tmp_path: Path) -> None:
    path = write(tmp_path / "eq.yaml", gpus=1, lrs="0.03, 3", epochs=30, epoch_s=0.2)
    run_dir = tmp_path / "run"
    run = await start_engine(load_manifest(str(path)), run_dir, exit_when_done=False)
    try:
        await run.wait_for(lambda: any(str(j.status) == "running"
                                       for j in run.engine.jobs.values()))
        code, out = await shell("edit", str(run_dir), "--early-stop", "eta=2,grace=4",
                                "--no-start")
        assert code == 0, out
        spec = run.engine.manifest.phase("main").results.early_stop
        assert spec is not None and (spec.eta, spec.grace, spec.metric) == (2, 4, "val_acc")
        assert any("early_stop is now val_acc (max), asha, eta 2, grace 4" in line
                   for line in (run.run_dir / "events.jsonl").read_text().splitlines())
        code, out = await shell("edit", str(run_dir), "--early-stop", "off", "--no-start")
        assert code == 0, out
        code, out = await shell("edit", str(run_dir), "--early-stop", "eta=3", "--no-start")
        assert code == 1 and "early stopping is off: `--early-stop on` first" in out, out
        code, out = await shell("edit", str(run_dir), "--early-stop", "on", "--no-start")
        assert code == 0, out
        spec = run.engine.manifest.phase("main").results.early_stop
        assert spec is not None and (spec.eta, spec.grace) == (3, 1)  # the manifest's again
        assert run.engine.ctx.early_stop_edits.by_phase == {}
        code, out = await shell("edit", str(run_dir), "--early-stop", "eta=1", "--no-start")
        assert code == 1 and "eta must be a whole number of at least 2" in out, out
        code, out = await shell("edit", str(run_dir), "--early-stop", "off", "--phase",
                                "nope", "--no-start")
        assert code == 1 and "no phase 'nope'" in out, out
    finally:
        await run.stop()


async def test_a_reload_leaves_a_persons_early_stop_unless_forced(tmp_path: Path) -> None:
    path = write(tmp_path / "eq.yaml", gpus=1, lrs="0.03, 3", epochs=30, epoch_s=0.2)
    run = await start_engine(load_manifest(str(path)), tmp_path / "run", exit_when_done=False)
    try:
        answer = await run.engine.send(SetEarlyStop(state="off", by="me"))
        assert answer["results"] == {"phase main": "ok"}, answer
        write(path, gpus=1, lrs="0.03, 3", epochs=30, epoch_s=0.2,
              early_stop="early_stop: {metric: val_acc, eta: 2, grace: 1}")
        answer = await run.engine.send(Reload())
        assert answer["detail"]["early_stop"] == {}
        assert answer["detail"]["early_stop_kept"] == {"main": "val_acc (max), asha, eta 2, "
                                                                "grace 1"}
        assert run.engine.manifest.phase("main").results.early_stop is None
        answer = await run.engine.send(Reload(force=True))
        assert answer["detail"]["early_stop"] == {"main": "val_acc (max), asha, eta 2, grace 1"}
        spec = run.engine.manifest.phase("main").results.early_stop
        assert spec is not None and spec.eta == 2
        assert run.engine.ctx.early_stop_edits.by_phase == {}
    finally:
        await run.stop()
