"""`eq-tui VERB RUN_DIR ...` end to end: a real engine on a simulated host (real screen
sessions), the command line in its own process, and what ran read from the host's ground truth
(the sim's run records and the attempt dirs' `cmd` files), not from the engine's state."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.control_client import ControlClient, find_socket
from eq_tui.manifest.loader import load_manifest
from tests.support.engine_run import FAST_JOB, EngineRun, job, make_manifest, start_engine
from tests.support.shell_verb import eq

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.2 --mem 1000"


def starts(run: EngineRun) -> Counter[tuple[str, int]]:
    """(job, attempt) -> how many times fake-train started it, from the sim's own records."""
    return Counter((str(e["job"]), int(e["attempt"])) for e in run.runs()
                   if e.get("event") == "start")


def launched_cmds(run: EngineRun, job_id: str) -> list[str]:
    """Each attempt's command as the host wrote it before starting the session."""
    return [Path(a.attempt_dir, "cmd").read_text().rstrip("\n")
            for a in run.engine.jobs[job_id].history if Path(a.attempt_dir, "cmd").exists()]


async def test_every_job_verb_from_the_shell(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("long1", LONG_JOB), job("long2", LONG_JOB),
                                        job("w1"), job("w2")])
    run_dir = tmp_path / "run"
    run = await start_engine(manifest, run_dir, exit_when_done=False)
    where = str(run_dir)
    try:
        await run.wait_for(lambda: run.status("long1") == run.status("long2") == "running")
        assert await eq("hold", where, "w1") == (0, "hold w1: done\n", "")
        code, out, _ = await eq("add", where, "--id", "x", "--priority", "9", "--",
                                *FAST_JOB.split())
        assert code == 0 and "add x: done" in out
        code, out, _ = await eq("kill", where, "long1", "--json")
        answer = json.loads(out)
        assert code == 0 and answer["ok"] and answer["results"] == {"long1": "ok"}
        await run.wait_for(lambda: run.status("x") == "completed")
        # x (priority 9, added last) went before w2; w1 is held
        order = [e["job"] for e in run.runs() if e.get("event") == "start"]
        assert order.index("x") < order.index("w2") if "w2" in order else True
        assert "w1" not in order
        code, out, err = await eq("kill", where, "x")
        assert code == 1 and "kill x: already completed" in out and "not changed" in err
        code, out, _ = await eq("kill", where, "--filter", "id:long2 status:running")
        assert (code, out) == (0, "kill long2: done\n")
        await run.wait_for(lambda: run.status("w2") == "completed")
        code, out, _ = await eq("edit", where, "w2", "--add-flag", "seed=7")
        assert (code, out) == (0, "edit w2: done\n")
        await run.wait_for(lambda: run.status("w2") == "completed"
                           and len(run.engine.jobs["w2"].history) == 2)
        assert launched_cmds(run, "w2") == [FAST_JOB, f"{FAST_JOB} --seed 7"]
        assert run.engine.jobs["w2"].edits[0]["by"].startswith("shell ")
        assert await eq("priority", where, "w1", "3") == (0, "priority w1: done\n", "")
        assert await eq("pause", where) == (0, "launching paused\n", "")
        assert (await eq("release", where, "w1"))[0] == 0
        assert (await eq("clone", where, "w1", "--id", "w1b", "--", FAST_JOB))[0] == 0
        await asyncio.sleep(0)
        assert run.status("w1") == "pending" and run.engine.paused
        assert await eq("resume", where) == (0, "launching resumed\n", "")
        await run.wait_for(lambda: run.status("w1") == run.status("w1b") == "completed")
        code, out, _ = await eq("release", where, "w1")
        assert code == 1 and "release w1: not held (completed)" in out
        assert (await eq("edit", where, "long1", "--", ""))[0] == 2
        assert (await eq("edit", where))[0] == 2
        assert (await eq("kill", where, "a;b"))[0] == 2
        code, out, err = await eq("kill", where, "--filter", "id:nothing-like-this")
        assert code == 1 and "no job matches" in err
    finally:
        await run.stop()
    # every job was started as often as the engine says it was launched, never more
    assert all(count == 1 for count in starts(run).values()), starts(run)
    code, _, err = await eq("pause", where)
    assert code == 3 and "no engine is running" in err


async def test_editing_jobs_while_the_engine_launches_them(tmp_path: Path) -> None:
    ids = [f"j{i}" for i in range(8)]
    manifest = make_manifest(tmp_path, [job(i) for i in ids])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    outcomes: dict[str, str] = {}
    try:
        client = await ControlClient.connect(tmp_path / "run")
        try:
            for job_id in ids:  # as fast as the engine takes them: some launch first
                answer = await client.command("edit", [job_id], {"add_flag": {"seed": "5"}})
                outcomes[job_id] = answer["results"][job_id]
        finally:
            await client.close()
        await run.wait_for(lambda: all(run.status(i) == "completed" for i in ids), 60)
    finally:
        await run.stop()
    assert set(outcomes.values()) <= {"ok", "launching: kill or requeue it first, or clone it",
                                      "running: kill or requeue it first, or clone it"}
    ran = starts(run)
    for job_id in ids:
        cmds = launched_cmds(run, job_id)
        attempts = run.engine.jobs[job_id].history
        assert all(ran[(job_id, a.n)] == 1 for a in attempts), (job_id, ran)
        if outcomes[job_id] == "ok" and len(cmds) == 1:
            assert cmds == [f"{FAST_JOB} --seed 5"]  # edited while it waited
        elif outcomes[job_id] == "ok":
            assert cmds == [FAST_JOB, f"{FAST_JOB} --seed 5"]  # it had finished: ran again
        else:
            assert cmds == [FAST_JOB]  # it was launching or running: left as it was
    assert "ok" in outcomes.values()


MANIFEST = """\
project: reload
hosts: [{{name: sim, simulate: {{gpus: 2, memory_mib: 24576}}}}]
jobs:
{jobs}
"""


def manifest_text(jobs: dict[str, str]) -> str:
    return MANIFEST.format(jobs="\n".join(f"  - {{id: {i}, cmd: \"{c}\"}}"
                                          for i, c in jobs.items()))


async def test_a_reload_while_jobs_finish(tmp_path: Path) -> None:
    first = {f"j{i}": f"{FAST_JOB} --seed {i}" for i in range(6)}
    source = tmp_path / "sweep.yaml"
    source.write_text(manifest_text(first))
    run = await start_engine(load_manifest(str(source)), tmp_path / "run",
                             exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("j0") == "running")
        second = {**first, "j4": f"{FAST_JOB} --seed 44", "j7": f"{FAST_JOB} --seed 7"}
        del second["j5"]
        source.write_text(manifest_text(second))
        code, out, _ = await eq("reload", str(tmp_path / "run"), "--dry-run", "--json")
        assert code == 0 and json.loads(out)["detail"]["dry_run"]
        code, out, _ = await eq("reload", str(tmp_path / "run"), "--json")
        assert code == 0, out
        plan = json.loads(out)["detail"]
        await run.wait_for(lambda: all(j.status.is_finished for j in run.engine.jobs.values()),
                           60)
    finally:
        await run.stop()
    ran = starts(run)
    assert "j7" in plan["add"] and ran[("j7", 1)] == 1
    if "j4" in plan["update"]:
        assert launched_cmds(run, "j4") == [f"{FAST_JOB} --seed 44"]
    else:  # it had launched before the reload: never touched
        assert launched_cmds(run, "j4") == [f"{FAST_JOB} --seed 4"] and "j4" in plan["kept"]
    if "j5" in plan["retire"]:
        assert ("j5", 1) not in ran and "j5" not in run.engine.jobs
    else:
        assert "j5" in plan["kept"] and ran[("j5", 1)] == 1
    assert all(count == 1 for count in ran.values()), ran


async def _send_and_cut(socket: Path, request: dict[str, Any]) -> None:
    """A command whose link drops before its answer comes back."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    writer.write(json.dumps(request).encode() + b"\n")
    await writer.drain()
    writer.close()
    del reader


async def test_a_command_sent_again_after_a_cut_link_or_an_engine_restart_is_applied_once(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("src")])
    run_dir = tmp_path / "run"
    run = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        socket = find_socket(run_dir)
        assert socket is not None
        await _send_and_cut(socket, {"op": "command", "id": 1, "name": "clone",
                                     "jobs": ["src"], "args": {}, "command_id": "cut-1"})
        code, out, _ = await eq("clone", str(run_dir), "src", "--command-id", "cut-1", "--json")
        answer = json.loads(out)
        assert code == 0 and answer["detail"]["job"] == "src-clone1" and answer["duplicate"]
        await run.wait_for(lambda: run.status("src-clone1") == "completed")
    finally:
        await run.stop()
    # the engine is restarted (with the original manifest): it still knows the id
    run = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        code, out, _ = await eq("clone", str(run_dir), "src", "--command-id", "cut-1")
        assert code == 0 and "had arrived already" in out
        assert sorted(run.engine.jobs) == ["src", "src-clone1"]
        assert run.engine.jobs["src-clone1"].origin == "clone"
    finally:
        await run.stop()
    ran = starts(run)
    assert ran[("src-clone1", 1)] == 1 and not any(j.startswith("src-clone2") for j, _ in ran)
