"""Leftover memory: processes of an ended attempt still holding its GPUs are ended; anyone
else's process on the same GPU is never touched (real screen sessions, simulated GPUs)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from eq_tui.hosts.factory import sim_state_dir
from eq_tui.sim.state import hold_memory
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration
LEAKY = "fake-train --epochs 1 --epoch-seconds 0.2 --mem 1000 --leak-child 3000"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return ") Z" not in handle.read()
    except FileNotFoundError:
        return False


@pytest.fixture
def foreign() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def start_foreign(started: list[subprocess.Popen[bytes]], env: dict[str, str]) -> int:
    proc = subprocess.Popen(["sleep", "600"], env={"PATH": os.environ["PATH"], **env},
                            start_new_session=True)
    started.append(proc)
    return proc.pid


@pytest.mark.parametrize(("flags", "launcher", "command"), [
    ("", "screen", "fake-train"),
    ("--leak-detach", "screen", "fake-train"),  # found by its environment
    ("--leak-clear-env", "screen", "sleep"),  # found by its process group
    ("", "tmux", "fake-train")],
    ids=["same-group", "own-session", "no-environment", "tmux"])
async def test_a_leaked_child_is_ended_and_someone_elses_process_is_never_touched(
        tmp_path: Path, foreign: list[subprocess.Popen[bytes]], flags: str, launcher: str,
        command: str) -> None:
    cmd = f"{LEAKY} {flags}"
    manifest = make_manifest(tmp_path, [job("leaky", cmd)], hosts=sim_hosts(("sim", 1)),
                             launcher=launcher)
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("leaky") == "running")
        state = sim_state_dir(tmp_path / "run", "sim")
        # someone else's process on the same GPU, and one that looks like ours but is
        # another run's (same job id and attempt, another run dir)
        stranger = start_foreign(foreign, {})
        lookalike = start_foreign(foreign, {"EQ_JOB_ID": "leaky", "EQ_ATTEMPT": "1",
                                            "EQ_PROJECT": manifest.project,
                                            "EQ_RUN_DIR": str(tmp_path / "other-run")})
        hold_memory(state, stranger, 0, 100)
        hold_memory(state, lookalike, 0, 100)
        await run.wait_for(lambda: run.status("leaky") == "completed")
        await run.wait_for(lambda: bool(run.engine.jobs["leaky"].history[0].cleanup), 30)
        cleanup = run.engine.jobs["leaky"].history[0].cleanup
        assert "leftover process" in cleanup and command in cleanup
        leaked = int(cleanup.split("GPU 0: ", 1)[1].split()[0])
        log = Path(run.engine.jobs["leaky"].history[0].log).read_text()
        assert f"worker pid={leaked} left holding" in log
        assert not alive(leaked)
        assert alive(stranger) and alive(lookalike)
        assert str(stranger) not in cleanup and str(lookalike) not in cleanup
        assert any("leftover" in a["message"] for a in run.engine.ctx.bus.alerts)
    finally:
        await run.stop()
    assert alive(stranger) and alive(lookalike)
