"""The real binary in a real terminal: tmux at 160x48, the screen read back with capture-pane."""

from __future__ import annotations

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
  - {id: quick_1, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000"}
  - {id: quick_2, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000"}
  - {id: quick_3, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000"}
  - {id: quick_4, cmd: "fake-train --epochs 8 --epoch-seconds 0.25 --mem 2000"}
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
    command = (f"cd {shlex.quote(str(tmp_path))} && EQ_TUI_CONFIG_DIR={tmp_path / 'config'} "
               f"{shlex.quote(sys.executable)} -m eq_tui manifest.yaml --run-dir run; "
               f"echo $? > {shlex.quote(str(rc_file))}; sleep 30")
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", command)


def quit_app(session: str, rc_file: Path) -> int:
    tmux("send-keys", "-t", session, "q")
    wait_for_screen(session, lambda s: "keep running" in s, timeout=10)
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
        assert quit_app(session, rc_file) == 130  # quit mid-run: jobs keep running
        tmux("kill-session", "-t", session)
        rc_file = tmp_path / "rc2"
        start(session, tmp_path, rc_file)
        # the header settles a frame after the last job: wait for the whole finished picture
        wait_for_screen(session, lambda s: "4/4 (100%)" in s and "FINISHED" in s
                        and "completed 4" in s, timeout=60)
        assert quit_app(session, rc_file) == 0
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    # from the hosts: the jobs running when the app quit were adopted, not started again
    sims = [tmp_path / "run" / "sim" / name for name in ("sim-a", "sim-b")]
    jobs = {f"quick_{i}" for i in range(1, 5)}
    assert launches_per_job(sims) == dict.fromkeys(jobs, 1)
    assert exits(sims) == {job: [0] for job in jobs}
