"""Early stopping across an engine restart and a reload: real sessions on the simulator, the
reports checked against what each job's log really printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eq_tui.api.commands import Reload
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest import load_manifest
from tests.support.engine_run import start_engine
from tests.support.ground_truth import launches

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
