"""An attempt's start and end are both the host's: the start its wrapper recorded just before the
job ran, the end its exit record's. Jobs that exit at once are judged on the first probe that
sees them, never seen running, and still get the host's start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eq_tui.api.model import Attempt
from eq_tui.manifest.loader import load_manifest
from eq_tui.manifest.model import JobSpec
from tests.integration.test_ledger import started
from tests.support.attempt_times import assert_host_times
from tests.support.engine_run import FAST_JOB, job, make_manifest, run_to_end, start_engine
from tests.support.sshbed import SshBed

INSTANT = ("true", "false", "exit 3", "echo done")


def instant_jobs() -> list[JobSpec]:
    return [job(f"i{n}", cmd) for n, cmd in enumerate(INSTANT * 2)]


@pytest.mark.integration
@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_every_attempt_starts_and_ends_by_the_hosts_clock(tmp_path: Path,
                                                                 launcher: str) -> None:
    jobs = [*instant_jobs(), job("train", FAST_JOB)]
    manifest = make_manifest(tmp_path, jobs, launcher=launcher)
    _, run = await run_to_end(manifest, tmp_path / "run")
    states = run.state["jobs"]
    assert {j["id"]: j["status"] for j in states}["train"] == "completed"
    assert_host_times(states)


@pytest.mark.integration
@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_a_killed_or_requeued_attempt_ends_by_the_hosts_clock(tmp_path: Path,
                                                                    launcher: str) -> None:
    """The end the host recorded as the job went (before, the engine's clock when the kill
    returned); a lost attempt's is the engine's, marked so (test_lost_end_is_the_engines)."""
    jobs = [job(name, "sleep 60") for name in ("killed", "requeued")]
    run = await start_engine(make_manifest(tmp_path, jobs, launcher=launcher), tmp_path / "run")
    try:
        await run.wait_for(lambda: all(run.status(j) == "running" for j in
                                       ("killed", "requeued")))
        assert (await run.engine.command("kill", ["killed"], {"grace": 1}))["ok"]
        assert (await run.engine.command("requeue", ["requeued"]))["ok"]
        await run.wait_for(lambda: run.engine.jobs["requeued"].attempts == 2
                           and run.status("requeued") == "running")
        await run.engine.command("kill", ["requeued"], {"grace": 1})
        await run.wait_for(lambda: run.engine.finished)
    finally:
        await run.stop()
    jobs_state = run.state["jobs"]
    assert_host_times(jobs_state)
    assert [a["end_by_engine"] for j in jobs_state for a in j["history"]] == [False] * 3


async def test_lost_end_is_the_engines(tmp_path: Path) -> None:
    """A session gone with no exit record: its end is the engine's clock, and says so."""
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    host.now += 7
    host.vanish("a")
    await engine.tick()
    (attempt, *_) = engine.jobs["a"].history
    assert (attempt.end, attempt.end_by_engine) == (host.now, True)
    engine.ctx.run_dir.release_lock()


def test_an_end_before_the_start_is_never_recorded() -> None:
    attempt = Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d", log="l",
                      start=100.5)
    attempt.close(100.0)  # an exit record with whole seconds only
    assert attempt.end == 100.5
    attempt.close(101.25)
    assert attempt.end == 101.25


# ---- over ssh: the same scripts on a real sshd -----------------------------------------------

SSH_MANIFEST = """\
project: sshtimes
cwd: {work}
hosts: [{{name: delta, ssh: delta, log_dir: {work}/logs}}]
jobs:
  - {{id: ok1, cmd: "true"}}
  - {{id: bad, cmd: "false"}}
  - {{id: ok2, cmd: "exit 0"}}
  - {{id: train, cmd: "fake-train --epochs 2 --epoch-seconds 0.1 --mem 100"}}
"""


BED_HOSTS = [("delta", 2, 24576, "Sim")]


@pytest.mark.integration
async def test_over_ssh_every_attempt_has_the_hosts_times(bed: SshBed, bed_work: Path,
                                                         tmp_path: Path) -> None:
    work = bed_work
    path = tmp_path / "times.yaml"
    path.write_text(SSH_MANIFEST.format(work=work))
    run = await start_engine(load_manifest(path), tmp_path / "run", poll=0.3,
                             ssh_config=str(bed.ssh_config))
    assert run.task is not None
    await asyncio.wait_for(run.task, 60)
    states = run.state["jobs"]
    assert {j["id"]: j["status"] for j in states} == {
        "ok1": "completed", "bad": "stuck", "ok2": "completed", "train": "completed"}
    assert_host_times(states)
