"""--detach, live status and stop through the real binary and the control socket."""

from __future__ import annotations

import json
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
