"""The real binary in a real terminal: tmux at 160x48, the screen read back with capture-pane."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ground_truth import exits, launches_per_job

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

MANIFEST = """\
project: e2e
hosts:
  - name: sim-a
    simulate: {gpus: 2, memory_mib: 24576, model: "NVIDIA GeForce RTX 4090 (sim)"}
  - name: sim-b
    simulate: {gpus: 1, memory_mib: 81920, model: "NVIDIA A100-SXM4-80GB (sim)"}
poll: 0.5
jobs:
  - {id: quick_1, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000 --seed 1"}
  - {id: quick_2, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000 --seed 2"}
  - {id: quick_3, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000 --seed 3"}
  - {id: quick_4, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000 --seed 4"}
"""


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def wait_for_screen(session: str, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if predicate(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"screen never matched; last screen:\n{screen}")


def start(session: str, tmp_path: Path, rc_file: Path) -> None:
    # unset: under pytest COLUMNS=80 LINES=24 are set, and Textual would take them over the pane
    command = (f"unset COLUMNS LINES; cd {shlex.quote(str(tmp_path))} && "
               f"EQ_TUI_CONFIG_DIR={tmp_path / 'config'} "
               f"{shlex.quote(sys.executable)} -m eq_tui manifest.yaml --run-dir run; "
               f"echo $? > {shlex.quote(str(rc_file))}; sleep 30")
    # Right after the last session is killed the tmux server is still exiting, and a new
    # session asked of it then fails ("server exited unexpectedly"): ask again once it is gone.
    deadline = time.monotonic() + 10
    while True:
        started = subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160",
                                  "-y", "48", command], capture_output=True, text=True)
        if started.returncode == 0:
            return
        assert "server exited unexpectedly" in started.stderr, started.stderr
        assert time.monotonic() < deadline, started.stderr
        time.sleep(0.1)


def quit_app(session: str, rc_file: Path, says: str = "keep running") -> int:
    tmux("send-keys", "-t", session, "q")
    wait_for_screen(session, lambda s: says in s, timeout=10)
    tmux("send-keys", "-t", session, "y")
    deadline = time.monotonic() + 20
    while not rc_file.exists() or not rc_file.read_text().strip():
        assert time.monotonic() < deadline, "the app did not exit"
        time.sleep(0.1)
    return int(rc_file.read_text())


def test_the_binary_in_tmux_shows_hosts_and_jobs_quits_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    session = f"eqtui-e2e-{uuid.uuid4().hex[:8]}"
    try:
        rc_file = tmp_path / "rc1"
        start(session, tmp_path, rc_file)
        screen = wait_for_screen(session, lambda s: "running" in s and "sim-b up" in s)
        assert "sim-a up" in screen and "quick_1" in screen and "eq-tui e2e" in screen
        # quit mid-run by choice: exit 0 and one line on what keeps running, how to come back
        assert quit_app(session, rc_file) == 0
        after = wait_for_screen(session, lambda s: "resumes the queue" in s, timeout=10)
        assert "keep running in their sessions" in after or "keeps running" in after
        tmux("kill-session", "-t", session)
        rc_file = tmp_path / "rc2"
        start(session, tmp_path, rc_file)
        # the header settles a frame after the last job: wait for the whole finished picture
        wait_for_screen(session, lambda s: "4/4 (100%)" in s and "FINISHED" in s
                        and "completed 4" in s, timeout=60)
        assert quit_app(session, rc_file, says="nothing is left running") == 0
        wait_for_screen(session, lambda s: "the queue has finished; summary in" in s)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    # from the hosts: the jobs running when the app quit were adopted, not started again
    sims = [tmp_path / "run" / "sim" / name for name in ("sim-a", "sim-b")]
    jobs = {f"quick_{i}" for i in range(1, 5)}
    assert launches_per_job(sims) == dict.fromkeys(jobs, 1)
    assert exits(sims) == {job: [0] for job in jobs}


def fleet_manifest(gate: Path, hosts: int = 16, jobs: int = 12) -> str:
    """Each job waits for the `gate` file before it trains: all twelve are running at once
    however slowly the box launches them, and end soon after the test opens the gate."""
    lines = ["project: fleet", "hosts:"]
    lines += [f'  - name: lab-gpu-box-{h:02d}\n    simulate: {{gpus: 4, memory_mib: 24576, '
              f'model: "NVIDIA GeForce RTX 4090 (sim)"}}' for h in range(1, hosts + 1)]
    lines += ["poll: 0.5", "jobs:"]
    wait = f"while [ ! -e {gate} ]; do sleep 0.2; done"
    lines += [f"  - {{id: long_{j:02d}, cmd: " + json.dumps(
        f"{wait}; fake-train --epochs 2 --epoch-seconds 0.25 --mem 2000 --seed {j}") + "}"
              for j in range(1, jobs + 1)]
    return "\n".join(lines) + "\n"


def test_sixteen_hosts_at_160x48_every_host_name_and_running_job_gpu_can_be_read(
        tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    (tmp_path / "manifest.yaml").write_text(fleet_manifest(gate))
    session = f"eqtui-e2e-{uuid.uuid4().hex[:8]}"
    names = [f"lab-gpu-box-{h:02d}" for h in range(1, 17)]
    # one phase: no phase column (its room goes to the last line); the failure column, empty,
    # sits after the status
    where = re.compile(r"\blong_(\d\d)\s+running\s+(?:\S.*?\s)?(lab-gpu-box-\d\d):([0-3])\s")
    try:
        rc_file = tmp_path / "rc"
        start(session, tmp_path, rc_file)

        def all_running(screen: str) -> bool:
            return len(where.findall(screen)) == 12 and all(f"{n} up" in screen for n in names)

        screen = wait_for_screen(session, all_running, timeout=60)
        for name in names:  # every host on its own line, its name in full
            assert sum(line.lstrip().startswith(f"{name} up") for line in
                       screen.splitlines()) == 1, name
        found = where.findall(screen)
        assert sorted(job for job, _, _ in found) == [f"{j:02d}" for j in range(1, 13)]
        assert len({(host, gpu) for _, host, gpu in found}) == 12  # one GPU each, all readable
        gate.touch()
        wait_for_screen(session, lambda s: "12/12 (100%)" in s and "FINISHED" in s, timeout=150)
        assert quit_app(session, rc_file, says="nothing is left running") == 0
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
