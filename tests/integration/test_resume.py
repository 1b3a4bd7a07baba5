"""Crash and resume through the real binary: kill -9 the engine mid-run, run it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from eq_tui.sim.state import find_overlaps, read_runs

pytestmark = pytest.mark.integration

MANIFEST = """\
project: resume
hosts:
  - {name: sim, simulate: {gpus: 3, memory_mib: 24576, linger_s: 0.3}}
oom_retry: {delay: 0.5, max_attempts: 3}
stale_grace_s: 1
grid: {seed: [1, 2, 3, 4, 5, 6, 7, 8, 9]}
template:
  id: "job_s${seed}"
  cmd: "fake-train --epochs 4 --epoch-seconds 0.3 --mem 3000 --output ${RUN_DIR}/out/s${seed}.json"
  output_check: "${RUN_DIR}/out/s${seed}.json"
"""


def _engine(manifest: Path, run_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "eq_tui", str(manifest), "--no-ui", "--poll", "0.2",
         "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _statuses(run_dir: Path) -> Counter[str]:
    try:
        data = json.loads((run_dir / "queue_state.json").read_text())
    except (OSError, ValueError):
        return Counter()
    return Counter(job["status"] for job in data["jobs"])


def _wait(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kill_9_mid_run_then_resume_launches_nothing_twice(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    run_dir = tmp_path / "run"
    for _ in range(2):
        engine = _engine(manifest, run_dir)
        _wait(lambda: _statuses(run_dir)["running"] >= 2)
        os.kill(engine.pid, signal.SIGKILL)
        engine.wait()
    # a second engine while one runs is refused with exit 3 naming its pid
    engine = _engine(manifest, run_dir)
    _wait(lambda: (run_dir / "engine.lock").exists() and
          (run_dir / "engine.lock").read_text().strip() == str(engine.pid))
    rival = subprocess.run([sys.executable, "-m", "eq_tui", str(manifest), "--no-ui",
                            "--run-dir", str(run_dir)], capture_output=True, text=True)
    assert rival.returncode == 3 and f"pid {engine.pid}" in rival.stderr
    out, _ = engine.communicate(timeout=120)
    assert engine.returncode == 0, out
    state = json.loads((run_dir / "queue_state.json").read_text())
    assert Counter(j["status"] for j in state["jobs"]) == {"completed": 9}
    runs = read_runs(run_dir / "sim" / "sim")
    starts = Counter(r["job"] for r in runs if r["event"] == "start")
    assert starts == {f"job_s{i}": 1 for i in range(1, 10)}, starts
    assert find_overlaps(runs) == []
    for job in state["jobs"]:
        assert job["attempts"] == 1 and len([a for a in job["history"] if a["launched"]]) == 1
    assert (run_dir / "summary.md").exists()
