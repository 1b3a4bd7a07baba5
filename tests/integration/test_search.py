"""A search on a real OpenSSH host (2 simulated GPUs) through the real binary: Optuna asks, the
engine runs each trial as a job, reads its metric and tells it; a kill -9 of the engine in the
middle and the same command again: the journal holds each trial once, 6 in all, each told the
value its job wrote, and the host's own records show every trial's job started once; `eq-tui
results` names the best trial. The kill
leaves Optuna's journal lock behind (as a kill inside a write does): the next engine clears it
instead of waiting Optuna's 30 s for it.

The kill is timed by the engine's own log, read as it is written (polling the journal from here
could miss the middle of a short search on a busy machine, and then wait for nothing)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from eq_tui.sim.state import read_runs
from tests.support.sshbed import SshBed

pytestmark = pytest.mark.integration

BED_HOSTS = [("alpha", 2, 24576, "NVIDIA RTX 4090 (sim)")]

MANIFEST = """\
project: searchbed
cwd: {work}
hosts:
  - {{name: alpha, ssh: alpha, log_dir: {work}/logs}}
goal: {{val_acc: max}}
search:
  space:
    lr: {{low: 0.001, high: 0.3, log: true}}
  trials: 6
  sampler: random
  seed: 0
template:
  cmd: "fake-train --epochs 3 --epoch-seconds 0.3 --mem 2000 --lr ${{lr}} --metrics jsonl"
"""


def _engine(manifest: Path, run_dir: Path, bed: SshBed) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "eq_tui", str(manifest), "--no-ui", "--poll", "0.2",
         "--run-dir", str(run_dir), "--ssh-config", str(bed.ssh_config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        bufsize=1)


def _read_until(engine: subprocess.Popen[str], words: tuple[str, ...],
                timeout: float = 60.0) -> list[str]:
    """The engine's lines up to the first holding all `words`; fails with them if it exits or
    the time is up first."""
    assert engine.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or not all(word in lines[-1] for word in words):
        left = deadline - time.monotonic()
        assert left > 0, "timed out:\n" + "".join(lines)
        if select.select([engine.stdout], [], [], left)[0]:
            line = engine.stdout.readline()
            assert line, "the engine exited:\n" + "".join(lines)
            lines.append(line)
    return lines


def _study(run_dir: Path) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name="main", storage=JournalStorage(
            JournalFileBackend(str(run_dir / "optuna.journal"))))
    except (KeyError, OSError):
        return None


def _states(run_dir: Path) -> Counter[str]:
    study = _study(run_dir)
    return Counter(t.state.name for t in study.trials) if study else Counter()


def test_a_search_survives_a_kill_9_and_tells_each_trial_once(bed: SshBed, bed_work: Path,
                                                               tmp_path: Path) -> None:
    manifest = tmp_path / "search.yaml"
    manifest.write_text(MANIFEST.format(work=bed_work))
    run_dir = tmp_path / "run"
    engine = _engine(manifest, run_dir, bed)
    # t4 is asked once t0 and t1 have ended; they are told a tick later (their metrics read),
    # while t4 and t5 are still to run: the middle of the search
    try:
        said = _read_until(engine, ("t4", "added (search)"))
        deadline = time.monotonic() + 30
        while _states(run_dir)["COMPLETE"] < 2:
            assert engine.poll() is None and time.monotonic() < deadline, "".join(said)
            time.sleep(0.05)
    finally:
        os.kill(engine.pid, signal.SIGKILL)
        said += engine.communicate()[0]
    assert engine.returncode == -signal.SIGKILL, said
    states = _states(run_dir)
    assert states["COMPLETE"] >= 2 and states["RUNNING"] >= 1, (states, "".join(said))
    lock = run_dir / "optuna.journal.lock"
    if not os.path.lexists(lock):  # unless the kill came inside Optuna's write
        os.symlink(run_dir / "optuna.journal", lock)  # how Optuna's JournalFileSymlinkLock locks
    started = time.monotonic()
    out, _ = _engine(manifest, run_dir, bed).communicate(timeout=120)
    assert time.monotonic() - started < 30, out  # Optuna alone would wait 30 s for the lock
    assert "removed optuna.journal's lock" in out and not os.path.lexists(lock)
    study = _study(run_dir)
    assert study is not None, out
    assert [(t.number, t.state.name) for t in study.trials] == \
        [(n, "COMPLETE") for n in range(6)], out
    state = json.loads((run_dir / "queue_state.json").read_text())
    jobs = {job["id"]: job for job in state["jobs"]}
    assert sorted(jobs) == [f"t{n}" for n in range(6)]
    runs = read_runs(bed.hosts["alpha"].sim_state)
    starts = Counter(r["job"] for r in runs if r["event"] == "start" and r.get("job") in jobs)
    assert starts == {job_id: 1 for job_id in jobs}, starts  # adopted, never run twice
    for trial in study.trials:
        job = jobs[f"t{trial.number}"]
        assert job["status"] == "completed" and job["cmd"].endswith(" --metrics jsonl")
        assert f"--lr {trial.params['lr']!r}" in job["cmd"]
        # the value told is the last val_acc the job itself wrote on the host
        written = Path(job["history"][-1]["attempt_dir"]) / "results.jsonl"
        last = json.loads(written.read_text().splitlines()[-1])
        assert trial.value == pytest.approx(last["val_acc"])
    # `eq-tui results` says the best trial the journal holds
    said = subprocess.run([sys.executable, "-m", "eq_tui", "results", str(run_dir), "--format",
                           "json"], check=True, capture_output=True, text=True).stdout
    [search] = json.loads(said)["searches"]
    assert (search["study"], search["trials"]) == ("main", {"complete": 6})
    assert (search["best_trial"], search["best_value"], search["best_params"]) == (
        study.best_trial.number, study.best_value, study.best_params)
