"""A living search on the simulator (real sessions, fake GPUs), read from Optuna's own journal:
a phase held while a trial runs asks no new trial though that trial ends and is told, and asks
again once released (pause: tests/unit/test_search_trials_engine.py); `eq-tui edit --search
trials=N` from the shell extends a search that had ended (the queue opens again and ends with
N), refuses fewer than asked, a restarted engine keeps the person's trials, and on a run with
no engine the edit starts one that asks the rest; a reload of a changed space is refused
naming the key, one of a changed `trials` is left to the person's edit without --force."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from eq_tui.api.commands import Hold, Release, Reload, SetSearch
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest import load_manifest
from tests.support.engine_run import start_engine
from tests.support.ground_truth import launches_per_job

pytestmark = pytest.mark.integration

MANIFEST = """\
project: live
hosts: [{{name: sim, simulate: {{gpus: 1}}}}]
goal: {{val_acc: max}}
search:
  space: {{lr: {space}}}
  trials: {trials}
  sampler: random
  seed: 0
template:
  cmd: "fake-train --lr ${{lr}} --epochs 2 --epoch-seconds {epoch_s}"
"""
SPACE = "{low: 0.001, high: 0.3, log: true}"


def write(path: Path, *, trials: int = 2, space: str = SPACE, epoch_s: float = 0.3) -> Path:
    path.write_text(MANIFEST.format(trials=trials, space=space, epoch_s=epoch_s))
    return path


def states(run_dir: Path) -> Counter[str]:
    """The trials of study main by state, as Optuna's journal has them."""
    study = optuna.load_study(study_name="main", storage=JournalStorage(
        JournalFileBackend(str(run_dir / "optuna.journal"))))
    return Counter(t.state.name.lower() for t in study.get_trials(deepcopy=False))


async def shell(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eq_tui", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_a_held_search_asks_nothing_until_released(tmp_path: Path) -> None:
    # one GPU: t0 runs and t1 waits; held, t0 ends and is told and t1 starts, where an unheld
    # search asks t2 to wait next
    run_dir = tmp_path / "run"
    run = await start_engine(load_manifest(str(write(tmp_path / "eq.yaml", trials=3))),
                             run_dir, exit_when_done=True)
    try:
        await run.wait_for(lambda: "t1" in run.engine.jobs and run.status("t0") == "running")
        answer = await run.engine.send(Hold(phase="main"))
        assert answer["results"] == {"phase main": "ok"}
        await run.wait_for(lambda: run.status("t1") == "running", timeout=30)
        await run.wait_for(lambda: states(run_dir) == {"complete": 1, "running": 1})
        await run.ticks_pass(4)  # past the tell and t1's start: a tick that would ask has run
        assert states(run_dir) == {"complete": 1, "running": 1} and "t2" not in run.engine.jobs
        answer = await run.engine.send(Hold(phase="main"))
        assert answer["results"] == {"phase main": "already held"}
        await run.wait_for(lambda: states(run_dir) == {"complete": 2})
        await run.ticks_pass(3)
        assert "t2" not in run.engine.jobs and not run.engine.finished  # it waits: not ended
        answer = await run.engine.send(Release(phase="main"))
        assert answer["results"] == {"phase main": "ok"}
        assert run.task is not None
        assert await asyncio.wait_for(run.task, 60) == 0
    finally:
        if run.task is not None and not run.task.done():
            await run.stop()
    assert states(run_dir) == {"complete": 3}
    answer = await run.engine.send(Release(phase="main"))
    assert answer["results"] == {"phase main": "not held by the crash guard nor by a person"}
    answer = await run.engine.send(Hold(phase="nope"))
    assert answer["results"] == {"phase nope": "no phase 'nope' (phases: main)"}


async def test_edit_extends_an_ended_search_and_a_restart_keeps_it(tmp_path: Path) -> None:
    path = write(tmp_path / "eq.yaml", epoch_s=0.1)
    run_dir = tmp_path / "run"
    manifest = load_manifest(str(path))
    first = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        await first.wait_for(lambda: first.engine.finished, timeout=60)
        assert states(run_dir) == {"complete": 2}
        answer = await first.engine.send(SetSearch(trials=3, by="me"))
        assert answer["detail"] == {"phase": "main", "trials": 3, "gpu_hours": None, "asked": 2}
        await first.wait_for(lambda: "t2" in first.engine.jobs)  # opened again, asked again
        await first.wait_for(lambda: first.engine.finished, timeout=60)
        assert states(run_dir) == {"complete": 3}
        answer = await first.engine.send(SetSearch(trials=2))
        assert answer["error"] == ("search of phase main: it has asked 3 trials already: "
                                   "trials can be 3 or more, not 2")
        # the file's space changed: the whole reload is refused, naming the key
        write(path, space="{low: 0.01, high: 0.5}")
        answer = await first.engine.send(Reload())
        error = str(answer["error"])
        assert not answer["ok"] and error.startswith(
            "the manifest was not reloaded: search.space changed (phase main's search)")
        assert "a new phase" in error
        # its trials changed: the person's 3 stays unless --force
        write(path, trials=4, epoch_s=0.1)
        answer = await first.engine.send(Reload())
        assert answer["ok"] and answer["detail"]["search_kept"] == {"main": "4 trials"}
        assert first.engine.finished and "phases" not in answer["detail"]["not_applied"]
    finally:
        await first.stop()
    # the same file again (trials: 2): the person's 3 holds, nothing more is asked
    second = await start_engine(load_manifest(str(write(path, epoch_s=0.1))), run_dir)
    assert second.task is not None
    assert await asyncio.wait_for(second.task, 60) == 0
    search = second.engine.manifest.phase("main").search
    assert search is not None and search.trials == 3
    assert states(run_dir) == {"complete": 3}
    # no engine runs: the edit starts one in the background, which asks t3 and exits when done
    code, out = await shell("edit", str(run_dir), "--search", "trials=4")
    assert code == 0, out
    assert "the search of phase main now asks up to 4 trials (3 asked so far)" in out
    deadline = time.monotonic() + 60
    while states(run_dir) != {"complete": 4} or (run_dir / "engine.lock").read_text().strip():
        assert time.monotonic() < deadline, states(run_dir)
        await asyncio.sleep(0.2)  # the background engine's end: its lock file emptied
    # the host's own records: each trial's job started once
    assert launches_per_job([sim_state_dir(run_dir, "sim")]) == {
        "t0": 1, "t1": 1, "t2": 1, "t3": 1}
