"""Typos from the shell get an answer, and cost nothing: a mistyped verb is named with the
nearest one; a job id the run lacks, with the nearest id it has; a `--set` flag the job's
command lacks, with the flags it has. Each exits 2 before anything is sent, and on a finished
run before any engine is started (the state file answers). Real processes, simulated GPUs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
FAST = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 500"
MANIFEST = f"""\
project: typo
hosts: [{{name: sim, simulate: {{gpus: 2}}}}]
poll: 0.3
default_cmd: {FAST}
grid: {{lr: [0.1, 0.01], seed: [1, 2]}}
template:
  args: {{lr: "${{lr}}", seed: "${{seed}}"}}
"""
LONG = """\
project: live
hosts: [{name: sim, simulate: {gpus: 1}}]
poll: 0.3
jobs:
  - {id: long, cmd: "fake-train --epochs 300 --epoch-seconds 0.2 --mem 500"}
  - {id: waiting, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 500 --lr 0.1"}
"""


def eq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def engines_for(run_dir: Path) -> list[int]:
    """Processes whose command line names the run dir: an engine started for it would."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(run_dir).encode() in word for word in words):
            found.append(int(proc.name))
    return found


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    done = eq("m.yaml", "--no-ui", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = (tmp_path / "experiment_queue" / "typo").resolve()
    assert not (run_dir / "control.json").exists()
    return run_dir


def attempts(run_dir: Path) -> dict[str, int]:
    """Each job's attempts in the run's state file ({} while an engine is replacing it)."""
    try:
        saved = json.loads((run_dir / "queue_state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {job["id"]: len(job["history"]) for job in saved["jobs"]}


def test_a_mistyped_verb_is_named_with_the_nearest_one(tmp_path: Path) -> None:
    typo = eq("stats", ".", cwd=tmp_path)
    assert typo.returncode == 2
    assert typo.stderr == ("eq-tui: unknown command 'stats' — did you mean `status`? "
                           "(`eq-tui --help` lists the commands)\n")
    far = eq("frobnicate", cwd=tmp_path)
    assert (far.returncode, far.stderr) == (2, "eq-tui: unknown command 'frobnicate' and no "
                                               "file of that name (`eq-tui --help` lists the "
                                               "commands)\n")
    # a manifest that is missing is still said to be missing; one that exists is run
    assert eq("sweep.yaml", cwd=tmp_path).stderr == "eq-tui: sweep.yaml: no such file\n"
    (tmp_path / "stats").write_text("hosts: [{name: sim, simulate: {gpus: 1}}]\n"
                                    "jobs: [{id: a, cmd: 'true'}]\n")
    assert eq("stats", "--dry-run", cwd=tmp_path).returncode == 0


def test_an_unknown_job_on_a_finished_run_is_answered_with_no_engine_started(
        finished: Path) -> None:
    before = attempts(finished)
    killed = eq("kill", str(finished), "lr0.1_sed1", cwd=finished)
    assert killed.returncode == 2, killed.stderr
    assert killed.stderr.startswith(f"eq-tui: kill: no job 'lr0.1_sed1' in {finished} — did "
                                    "you mean 'lr0.1_seed1'?")
    assert "lists its 4 jobs" in killed.stderr
    nothing_near = eq("kill", str(finished), "nosuchjob", cwd=finished)
    assert nothing_near.returncode == 2 and "did you mean '" in nothing_near.stderr
    assert not (finished / "control.json").exists() and not engines_for(finished)
    assert "no engine was running" not in killed.stderr + nothing_near.stderr
    assert attempts(finished) == before


def test_set_with_a_flag_the_command_lacks_is_refused_and_the_job_not_rerun(
        finished: Path) -> None:
    before = attempts(finished)
    refused = eq("edit", str(finished), "lr0.1_seed1", "--set", "sed=3", cwd=finished)
    assert refused.returncode == 2
    assert refused.stderr == ("eq-tui: edit lr0.1_seed1: the command has no --sed (its flags: "
                              "--epochs, --epoch-seconds, --mem, --lr, --seed); did you mean "
                              "--seed? (--add-flag sed=3 adds it as a new flag); nothing was "
                              "changed\n")
    cloned = eq("clone", str(finished), "lr0.1_seed1", "--set", "nosuchflag=3", cwd=finished)
    assert cloned.returncode == 2 and "has no --nosuchflag" in cloned.stderr
    assert not (finished / "control.json").exists() and not engines_for(finished)
    assert attempts(finished) == before
    # the flag it has is changed: the job runs again with it (an engine started for that)
    changed = eq("edit", str(finished), "lr0.1_seed1", "--set", "seed=3", cwd=finished)
    assert (changed.returncode, changed.stdout) == (0, "edit lr0.1_seed1: done\n"), \
        changed.stderr
    wait_until(lambda: attempts(finished).get("lr0.1_seed1") == 2
               and not (finished / "control.json").exists(), "the edited job run again")
    saved = json.loads((finished / "queue_state.json").read_text())
    edited = next(job for job in saved["jobs"] if job["id"] == "lr0.1_seed1")
    assert edited["cmd"] == f"{FAST} --lr 0.1 --seed 3" and edited["status"] == "completed"


def test_a_running_engine_refuses_the_same_before_the_command_is_sent(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(LONG)
    run_dir = (tmp_path / "experiment_queue" / "live").resolve()
    engine = subprocess.Popen([*EQ, "m.yaml", "--no-ui"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: (run_dir / "control.json").exists(), "the engine's socket")
        typo = eq("hold", str(run_dir), "wating", cwd=tmp_path)
        assert typo.returncode == 2 and "no job 'wating'" in typo.stderr
        assert "did you mean 'waiting'?" in typo.stderr
        flag = eq("edit", str(run_dir), "waiting", "--set", "lrr=0.5", cwd=tmp_path)
        assert flag.returncode == 2 and "did you mean --lr?" in flag.stderr
        # on purpose, a new flag is added; a flag it has is changed
        added = eq("edit", str(run_dir), "waiting", "--add-flag", "message=hi", "--set", "lr=0.5",
                   cwd=tmp_path)
        assert (added.returncode, added.stdout) == (0, "edit waiting: done\n"), added.stderr
        assert eq("kill", str(run_dir), "long", cwd=tmp_path).returncode == 0
        assert engine.wait(timeout=60) == 1  # long killed, waiting completed: the run is done
        saved = json.loads((run_dir / "queue_state.json").read_text())
        waiting = next(job for job in saved["jobs"] if job["id"] == "waiting")
        assert waiting["cmd"] == ("fake-train --epochs 1 --epoch-seconds 0.1 --mem 500 "
                                  "--lr 0.5 --message hi")
        assert waiting["status"] == "completed"
    finally:
        if engine.poll() is None:
            eq("kill", str(run_dir), "long", cwd=tmp_path)
            eq("stop", str(run_dir), cwd=tmp_path)
            engine.wait(timeout=60)
