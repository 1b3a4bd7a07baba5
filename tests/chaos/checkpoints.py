"""The chaos run's checkpoint contracts (issue 44): every job of ours saves a checkpoint an epoch
(`fake-train --checkpoint-dir ckpt/${JOB_ID}`) and declares where, so that each restart (an OOM
retry, the restart after a stall, a requeue after a reboot, a retry by hand) must resume. What
the hosts recorded is judged by tests/chaos/resumes.py; here: the files on the disk, and the
final numbers of each restarted job against a run of it that never stopped."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from eq_tui.sim.state import sim_bin_dir
from tests.chaos.resumes import ResumeReport, check_resumes, processes
from tests.chaos.verdict import Run, read_output

CKPT = "ckpt"
SAVE_FLAGS = f"--checkpoint-dir {CKPT}/${{JOB_ID}}"
CONTRACT = f'checkpoint: {{path: "{CKPT}/${{id}}/epoch-*.pt", resume: "--resume {{checkpoint}}"}}'
# the chaos bed's hosts are loopback sshd's of one machine: they share the working dir, so a
# checkpoint one saved is there for a restart on the other
DISK = "work"
EPOCH_FILE = re.compile(r"epoch-(\d+)\.pt")
CLONE = "-chaos"  # the chaos driver's clones: <source>-chaos<n> (chaos.command_while_killed)
# what a run's numbers depend on (the rest: its pace, memory and faults)
NUMBERS = ("--epochs", "--seed", "--lr")


def checkpoint_files(work: Path) -> dict[tuple[str, int], float]:
    """(job, epoch) -> the mtime of its checkpoint file in the working dir."""
    found = {}
    for path in (work / CKPT).glob("*/epoch-*.pt"):
        match = EPOCH_FILE.fullmatch(path.name)
        if match:
            found[(path.parent.name, int(match[1]))] = path.stat().st_mtime
    return found


def judge_resumes(records: Mapping[str, list[dict[str, Any]]], runs: Iterable[Run],
                  work: Path, reboots: Mapping[str, list[tuple[float, float]]]
                  ) -> ResumeReport:
    procs = []
    runs = list(runs)
    for host, recs in records.items():
        procs += processes(host, recs, [r for r in runs if r.host == host])
    # a clone keeps no checkpoint contract (engine/commands/editing.py: its command saves
    # where its source's does), so its restarts begin from scratch by design
    procs = [proc for proc in procs if CLONE not in proc.job]
    return check_resumes(procs, dict.fromkeys(records, DISK), {DISK: checkpoint_files(work)},
                         reboots)


@functools.cache
def uninterrupted_loss(cmd: str, job: str) -> float | None:
    """The final loss a run of `cmd` as `job` prints when nothing stops it (at full speed)."""
    words = shlex.split(cmd)
    numbers = [w for flag in NUMBERS if flag in words
               for w in (flag, words[words.index(flag) + 1])]
    with tempfile.TemporaryDirectory(prefix="eqchaos-ref-") as scratch:
        state = Path(scratch, "state")
        state.mkdir()
        (state / "config.json").write_text("{}")
        env = {**os.environ, "EQ_SIM_STATE": str(state), "CUDA_VISIBLE_DEVICES": "0",
               "EQ_JOB_ID": job, "EQ_ATTEMPT": "1"}
        done = subprocess.run(
            [str(sim_bin_dir() / "fake-train"), *numbers, "--epoch-seconds", "0",
             "--checkpoint-dir", f"{scratch}/ckpt", "--output", f"{scratch}/out.json"],
            env=env, capture_output=True, timeout=60, check=False)
        output = read_output(Path(scratch, "out.json")) if done.returncode == 0 else None
    return None if output is None else float(output["final_loss"])


def final_metric_mismatches(jobs: Mapping[str, str], restarted: Iterable[str],
                            work: Path) -> tuple[int, list[str]]:
    """Of the restarted jobs (job -> command) that wrote their output, how many were compared,
    and each whose final loss is not what a run that never stopped prints."""
    checked, found = 0, []
    for job in sorted(set(restarted) & set(jobs)):
        if "--checkpoint-dir" not in jobs[job]:
            continue  # it saves nothing: a restart runs other numbers by design
        output = read_output(work / "out" / f"{job}.json")
        if output is None:
            continue
        checked += 1
        want = uninterrupted_loss(jobs[job], job)
        if want is None or abs(float(output["final_loss"]) - want) > 1e-9:
            found.append(f"{job}: final loss {output['final_loss']} after its restarts, "
                         f"{want} uninterrupted")
    return checked, found
