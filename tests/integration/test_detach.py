"""--detach, live status and stop through the real binary and the control socket."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ground_truth import launches_per_job

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: detached
hosts: [{name: sim, simulate: {gpus: 1}}]
jobs:
  - {id: long, cmd: "fake-train --epochs 600 --epoch-seconds 0.1 --mem 1000"}
"""


def eq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=90)


def test_detach_status_live_then_stop(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    run_dir = tmp_path / "run"
    started = eq(str(manifest), "--detach", "--poll", "0.3", "--run-dir", str(run_dir))
    assert started.returncode == 0, started.stderr
    assert f"eq-tui attach {run_dir}" in started.stdout
    assert f"eq-tui stop {run_dir}" in started.stdout
    live = eq("status", str(run_dir))
    assert "live from the running engine" in live.stdout
    # a second engine on the same run dir is refused while the detached one runs
    second = eq(str(manifest), "--detach", "--run-dir", str(run_dir))
    assert second.returncode == 3 and "in use by another engine" in second.stderr
    deadline = time.monotonic() + 30
    while json.loads(eq("status", str(run_dir), "--json").stdout)["counts"] != {"running": 1}:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    stopped = eq("stop", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 30
    while "from the state file" not in eq("status", str(run_dir)).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # the job kept running in its session; the next run adopts it, and kill ends it
    assert eq("stop", str(run_dir)).returncode == 3
    state = json.loads((run_dir / "queue_state.json").read_text())
    assert state["jobs"][0]["status"] == "running"
    cleanup = f"""
import asyncio, sys
from pathlib import Path
from eq_tui.manifest.loader import load_manifest
from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import make_hosts
async def main():
    m = load_manifest({str(manifest)!r}); d = Path({str(run_dir)!r})
    e = Engine(m, d, make_hosts(m, d), poll=0.2)
    await e.start(); await e.tick()
    r = await e.command("kill", ["long"]); await e.stop(); await e.run()
    sys.exit(0 if r["ok"] else 1)
asyncio.run(main())
"""
    assert subprocess.run([sys.executable, "-c", cleanup], timeout=60).returncode == 0
    # from the host: the adopted job was never started a second time
    assert launches_per_job([run_dir / "sim" / "sim"]) == {"long": 1}


QUICK = """\
project: quick
hosts: [{name: sim, simulate: {gpus: 2}}]
poll: 0.3
jobs:
  - {id: ok, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 500"}
  - {id: bad, cmd: "sh -c 'exit 3'"}
"""


def test_detach_on_a_finished_run_says_so_and_one_that_resumes_says_how_far(
        tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(QUICK)
    run_dir = tmp_path / "run"
    first = eq(str(manifest), "--no-ui", "--run-dir", str(run_dir))
    assert first.returncode == 1, first.stderr  # `bad` is stuck: the queue exits 1
    again = eq(str(manifest), "--detach", "--run-dir", str(run_dir))
    assert again.returncode == 1, again.stderr  # the queue's exit code, not "did not come up"
    assert f"the run in {run_dir} has finished (completed 1, stuck 1; exit 1)" in again.stdout
    assert f"eq-tui {manifest} --fresh --detach" in again.stdout
    assert "did not come up" not in again.stderr

    # an edited manifest adds a job: the detached engine resumes the run and says so
    manifest.write_text(QUICK + '  - {id: more, cmd: "fake-train --epochs 4 --epoch-seconds '
                        '0.5 --mem 500"}\n')
    resumed = eq(str(manifest), "--detach", "--run-dir", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {run_dir}: 2 of 3 jobs done" in resumed.stdout
    assert f"eq-tui attach {run_dir}" in resumed.stdout
    # the engine finishes `more` and exits on its own: wait for it (no process left behind)
    deadline = time.monotonic() + 60
    while "no engine is running" not in (status := eq("status", str(run_dir))).stdout \
            or not re.search(r"completed\s+2\b", status.stdout):
        assert time.monotonic() < deadline, status.stdout
        time.sleep(0.2)


def test_what_a_detach_on_a_host_said_is_read_back() -> None:
    from eq_tui.cli.remote.start import parse_started

    said = ("eq-tui: resuming /home/u/.eq-tui/runs/p/run: 12 of 40 jobs done\n"
            "eq-tui: engine for m.yaml is running in the background (pid 7); run dir ...\n")
    assert parse_started(said, 0).resuming == "/home/u/.eq-tui/runs/p/run: 12 of 40 jobs done"
    done = parse_started("eq-tui: finished: the run in /r has finished (completed 3, stuck 1; "
                         "exit 1): nothing to run for m.yaml\n  start over: ...\n", 1)
    assert done.finished == "/r has finished (completed 3, stuck 1; exit 1)"
    assert done.exit_code == 1 and not done.resuming
    assert not parse_started("eq-tui: engine for m.yaml is running", 0).finished
