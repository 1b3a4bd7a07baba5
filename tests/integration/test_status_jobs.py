"""`eq-tui status RUN_DIR --jobs [--json]`: a line per job with where it runs and why it waits,
live from a running engine and from the state file once it has stopped."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from eq_tui.hosts.factory import sim_state_dir
from eq_tui.hosts.local import make_sim_host
from eq_tui.manifest.model import PhaseSpec
from tests.support.engine_run import EngineRun, job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration

LONG = "fake-train --epochs 600 --epoch-seconds 0.1 --mem 1000"
BUSY = "no free GPU (1 of 1 busy)"


async def eq(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eq_tui", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert not err, err.decode()
    return process.returncode or 0, out.decode()


def lines_by_id(text: str) -> dict[str, list[str]]:
    rows = [line.split(None, 3) for line in text.splitlines()]
    return {row[0]: row[1:] for row in rows}


async def check_jobs_listing(run_dir: Path) -> None:
    code, text = await eq("status", str(run_dir), "--jobs")
    assert code == 0, text
    rows = lines_by_id(text)
    assert rows["whole"][:2] == ["running", "sim:0"]
    assert rows["small1"] == rows["small2"] == ["pending", "-", BUSY]
    assert rows["eval"] == ["pending", "-", "waits for phase main"]
    code, text = await eq("status", str(run_dir), "--jobs", "--json")
    assert code == 0
    listed: list[dict[str, Any]] = json.loads(text)
    assert [row["id"] for row in listed] == ["small1", "small2", "whole", "eval"]
    by_id = {row["id"]: row for row in listed}
    assert by_id["whole"] | {"reason": ""} == {
        "id": "whole", "status": "running", "host": "sim", "gpus": [0], "where": "sim:0",
        "reason": "", "next_ask": None, "resumed_from": None, "preempted_by": None}
    assert by_id["small1"] == {"id": "small1", "status": "pending", "host": None, "gpus": [],
                               "where": None, "reason": BUSY, "next_ask": None,
                               "resumed_from": None, "preempted_by": None}
    assert by_id["eval"]["reason"] == "waits for phase main"


async def end_the_running_jobs(run: EngineRun) -> None:
    """The engine stopped; its jobs keep running in their sessions: end them."""
    host = make_sim_host("sim", str(sim_state_dir(run.run_dir, "sim")),
                         str(run.run_dir / "logs"))
    for record in run.state["jobs"]:
        if record["status"] in ("launching", "running"):
            attempt = record["history"][-1]
            await host.kill(attempt["session"], attempt["attempt_dir"], "screen")


async def test_status_jobs_lists_each_job_with_why_it_waits_live_and_stopped(
        tmp_path: Path) -> None:
    # the case: two 10 GiB jobs listed first wait behind a whole-card job listed third
    jobs = [job("small1", LONG, mem_mib=10240), job("small2", LONG, mem_mib=10240),
            job("whole", LONG), job("eval", LONG, phase="eval")]
    phases = (PhaseSpec("main"), PhaseSpec("eval", depends_on=("main",)))
    manifest = make_manifest(tmp_path, jobs, phases=phases,
                             hosts=sim_hosts(("sim", 1), memory_mib=81920))
    run = await start_engine(manifest, tmp_path / "run")
    try:
        # the queue's reason is kept once, not copied into every waiting job's record: judged
        # by a tick that began after `whole` was running (the tick that launched it gave the
        # small jobs their packing-order reason, true then; a launch can return before the
        # next tick)
        await run.wait_for(lambda: run.status("whole") == "running")
        ticks = run.engine.pacing.full_ticks
        await run.wait_for(lambda: run.engine.pacing.full_ticks >= ticks + 2
                           and run.engine.ctx.waiting_reason == BUSY)
        assert run.engine.jobs["small1"].reason is None
        assert run.engine.jobs["eval"].reason == "waits for phase main"
        await check_jobs_listing(run.run_dir)
        live = (await eq("status", str(run.run_dir)))[1]
        assert "live from the running engine" in live
        # the engine's ETA, as it published it (queue_eta), counted down: never computed here
        eta = run.engine.queue_eta.eta_s
        assert f"  ETA         {'-' if eta is None else ''}" in live, live
        await run.stop()
        await check_jobs_listing(run.run_dir)
        assert "from the state file" in (await eq("status", str(run.run_dir)))[1]
    finally:
        await run.stop()
        await end_the_running_jobs(run)
