"""The Slurm host against a real single-node Slurm (munged, slurmctld, slurmd; 4 fake GPUs),
driven by a real Engine. Jobs are the sim's fake-train; Slurm sets CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, AttemptRef, ProbeRequest
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.runner import CommandResult
from eq_tui.hosts.shell_host import script
from eq_tui.hosts.slurm import SlurmHost
from eq_tui.hosts.slurm_parse import (
    SlurmJob,
    attempt_from_slurm,
    needs_lookup,
    parse_nodes,
    parse_sacct,
    parse_squeue,
)
from eq_tui.manifest.model import EnvVar, HostSpec, JobSpec, Manifest, PhaseSpec, SlurmSpec
from eq_tui.sim.state import init_sim_state, sim_bin_dir
from tests.support.engine_run import EngineRun, job, make_manifest, run_to_end, start_engine
from tests.support.slurmbed import SharedSlurm, SlurmBed, slurm_available

TEST_LOCK = Path("/tmp/eq-tui-slurm.tests.lock")
QUICK = "fake-train --epochs 2 --epoch-seconds 0.2 --mem 2000"


# ---- unit: state mapping (no daemons) ------------------------------------------------------

def files_probe(**kwargs: Any) -> AttemptProbe:
    """What probe.sh reports for an attempt dir (pid_alive is the login node's view)."""
    base = AttemptProbe(key="j", session_alive=False, pid=None, pid_alive=True, started=None,
                        exit_code=None, exited_at=None, log_size=0, output_ok=None)
    return replace(base, **kwargs)


def test_squeue_lines_keep_the_newest_job_per_name_and_the_pending_reason() -> None:
    text = ("11|eq_p_t_a_a1|PENDING|Resources\n12|eq_p_t_b_a1|RUNNING|None\n"
            "9|eq_p_t_a_a1|CANCELLED|None\n13|other|RUNNING|None\n")
    jobs = parse_squeue(text, "eq_p_t_")
    assert set(jobs) == {"eq_p_t_a_a1", "eq_p_t_b_a1"}
    assert jobs["eq_p_t_a_a1"] == SlurmJob("11", "eq_p_t_a_a1", "PENDING", "Resources")
    probe = attempt_from_slurm(files_probe(), jobs["eq_p_t_a_a1"])
    assert probe.session_alive and not probe.pid_alive
    assert probe.detail == "PENDING (Resources)"
    running = attempt_from_slurm(files_probe(pid=7), jobs["eq_p_t_b_a1"])
    assert running.session_alive and running.pid_alive and running.detail == ""


def test_sacct_out_of_memory_maps_to_exit_137_and_a_host_oom_log_line() -> None:
    from eq_tui.engine.classify import classify_failure
    from eq_tui.engine.model import FailureClass

    text = ("41|eq_p_t_big_a1|OUT_OF_MEMORY|0:125\n41.batch|batch|OUT_OF_MEMORY|0:125\n"
            "42|eq_p_t_tl_a1|TIMEOUT|0:0\n43|eq_p_t_gone_a1|NODE_FAIL|0:0\n"
            "44|eq_p_t_f_a1|FAILED|0:9\n45|unrelated|FAILED|1:0\n")
    names = frozenset({"eq_p_t_big_a1", "eq_p_t_tl_a1", "eq_p_t_gone_a1", "eq_p_t_f_a1"})
    jobs = parse_sacct(text, names)
    assert set(jobs) == names
    files = files_probe(pid=99)
    assert needs_lookup(None, files) and needs_lookup(jobs["eq_p_t_big_a1"], files)
    assert not needs_lookup(SlurmJob("1", "x", "RUNNING"), files)

    oom = attempt_from_slurm(files, jobs["eq_p_t_big_a1"], log_tail="epoch 1\n")
    assert (oom.exit_code, oom.session_alive, oom.pid_alive) == (137, False, False)
    assert "OUT_OF_MEMORY" in oom.log_tail and oom.detail == "OUT_OF_MEMORY"
    assert classify_failure(oom.exit_code, oom.log_tail).cls == FailureClass.HOST_OOM

    timeout = attempt_from_slurm(files, jobs["eq_p_t_tl_a1"])
    assert timeout.exit_code == 143 and timeout.detail == "TIMEOUT"
    killed = attempt_from_slurm(files, jobs["eq_p_t_f_a1"])
    assert killed.exit_code == 137 and killed.detail == "FAILED"
    for vanished in (jobs["eq_p_t_gone_a1"], None):
        lost = attempt_from_slurm(files, vanished)
        assert (lost.exit_code, lost.session_alive, lost.pid_alive) == (None, False, False)


def test_an_exit_record_wins_and_completing_with_one_is_not_alive() -> None:
    files = files_probe(pid=5, exit_code=0, exited_at=1.0, output_ok=True)
    done = attempt_from_slurm(files, SlurmJob("3", "n", "COMPLETING"))
    assert not done.session_alive and done.exit_code == 0
    assert not needs_lookup(SlurmJob("3", "n", "COMPLETED"), files)


def test_node_gres_allocation() -> None:
    text = ("NodeName=n1 State=MIXED Partitions=gpu,debug Gres=gpu:a100:4(S:0-1) "
            "GresUsed=gpu:a100:3(IDX:0-2)\nNodeName=n2 State=IDLE Partitions=cpu Gres=(null) "
            "GresUsed=gpu:0\n")
    nodes = parse_nodes(text, "gpu")
    assert [(n.node, n.gpus_used, n.gpus_total) for n in nodes] == [("n1", 3, 4)]


class FakeSlurmRunner(LocalRunner):
    """The real scripts with stand-in squeue/sacct on PATH; `fail_lookup` cuts the second
    round trip off as an unreachable host would."""

    def __init__(self, bin_dir: Path, *, fail_lookup: bool = False) -> None:
        super().__init__({**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"})
        self.fail_lookup = fail_lookup

    async def run(self, script_text: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        if self.fail_lookup and script_text == script("slurm_finished.sh"):
            raise HostError("connection lost")
        return await super().run(script_text, args, stdin=stdin, timeout=timeout)


def fake_slurm_bin(tmp_path: Path, *, squeue: str = "", sacct: str = "") -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("squeue", squeue), ("sacct", sacct), ("scontrol", "")):
        (bin_dir / name).write_text(f"#!/bin/sh\n[ -z '{text}' ] || echo '{text}'\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


async def probe_one(tmp_path: Path, runner: LocalRunner, *, log: str = "") -> AttemptProbe:
    attempt = tmp_path / "a1"
    attempt.mkdir()
    (attempt / "pid").write_text("4242\n")
    (attempt / "slurm_job_id").write_text("41\n")
    (attempt / "log").write_text(log)
    host = SlurmHost("c", runner, SlurmSpec(), slots=range(2))
    snap = await host.probe(ProbeRequest(attempts=(
        AttemptRef("j", "eq_p_t_j_a1", str(attempt), None),)))
    assert snap.ok, snap.error
    assert [g.index for g in snap.gpus] == [0, 1]
    return snap.attempts["j"]


async def test_a_job_slurm_no_longer_knows_is_lost(tmp_path: Path) -> None:
    probe = await probe_one(tmp_path, FakeSlurmRunner(fake_slurm_bin(tmp_path)))
    assert (probe.session_alive, probe.pid_alive, probe.exit_code) == (False, False, None)


async def test_a_failed_lookup_is_never_taken_for_a_vanished_job(tmp_path: Path) -> None:
    probe = await probe_one(tmp_path, FakeSlurmRunner(fake_slurm_bin(tmp_path),
                                                      fail_lookup=True))
    assert probe.session_alive and probe.exit_code is None


async def test_sacct_out_of_memory_reaches_the_probe_with_the_log_tail(tmp_path: Path) -> None:
    bin_dir = fake_slurm_bin(tmp_path, squeue="41|eq_p_t_j_a1|OUT_OF_MEMORY|None",
                             sacct="41|eq_p_t_j_a1|OUT_OF_MEMORY|0:125")
    probe = await probe_one(tmp_path, FakeSlurmRunner(bin_dir), log="epoch 1/3\n")
    assert probe.exit_code == 137 and not probe.session_alive
    assert "epoch 1/3" in probe.log_tail and "OUT_OF_MEMORY" in probe.log_tail


# ---- the real cluster ----------------------------------------------------------------------

needs_slurm = pytest.mark.skipif(not slurm_available(),
                                 reason="slurmctld/slurmd/munge not installed (.ci/setup)")


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmBed]:
    with SharedSlurm() as bed:
        yield bed


@pytest.fixture
def cluster(slurm_cluster: SlurmBed, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmBed]:
    """The shared cluster, with its 4 GPUs to this test alone (xdist workers take turns)."""
    with open(TEST_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
        try:
            yield slurm_cluster
        finally:
            _cancel_ours(slurm_cluster)


def _cancel_ours(bed: SlurmBed, timeout: float = 20.0) -> None:
    """Cancel what this module submitted (names eq_...) and wait until the GPUs are free."""
    deadline = time.monotonic() + timeout
    while True:
        out = bed.run("squeue", "-h", "-o", "%i|%j", check=False)
        ours = [line.split("|")[0] for line in out.splitlines() if "|eq_" in line]
        if not ours or time.monotonic() > deadline:
            return
        bed.run("scancel", *ours, check=False)
        time.sleep(0.1)


def slurm_manifest(tmp_path: Path, jobs: list[JobSpec], *, project: str,
                   max_parallel: int = 4, mem: str | None = None, **kwargs: Any) -> Manifest:
    state = tmp_path / "sim"
    init_sim_state(state, host="slurm", gpus=4, memory_mib=24576)
    env = {"EQ_SIM_STATE": EnvVar(str(state)),
           "PATH": EnvVar(f"{sim_bin_dir()}:/usr/local/bin:/usr/bin:/bin")}
    host = HostSpec(name="slurm", max_parallel=max_parallel,
                    slurm=SlurmSpec(partition="gpu", mem=mem, time="00:05:00"))
    return make_manifest(tmp_path, jobs, hosts=(host,), project=project, env=env, **kwargs)


def submissions(bed: SlurmBed, project: str, token: str) -> dict[str, int]:
    """How many Slurm jobs each job name of this run got, from the job-completion file."""
    counts: dict[str, int] = {}
    for record in bed.completed(f"eq_{project}_{token}_"):
        counts[record["Name"]] = counts.get(record["Name"], 0) + 1
    return counts


def squeue_states(bed: SlurmBed, prefix: str) -> dict[str, str]:
    """Job name → `STATE|reason` for the jobs whose names start with prefix."""
    out = bed.run("squeue", "-h", "-t", "all", "-o", "%j|%T|%r", check=False)
    return {p[0]: f"{p[1]}|{p[2]}" for p in (ln.split("|") for ln in out.splitlines())
            if p[0].startswith(prefix)}




@pytest.mark.integration
@needs_slurm
async def test_phased_sweep_with_an_oom_retry_runs_to_the_end(cluster: SlurmBed,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "out"
    jobs = [job("teach_a", f"{QUICK} --output {out}/teach_a.json", phase="teach",
                output_check=f"{out}/teach_a.json"),
            job("teach_b", QUICK, phase="teach"),
            job("student_1", QUICK, phase="distill"),
            job("student_oom", f"{QUICK} --oom-attempts 1", phase="distill")]
    phases = (PhaseSpec("teach"), PhaseSpec("distill", depends_on=("teach",)))
    manifest = slurm_manifest(tmp_path, jobs, project="sweep", phases=phases)
    code, run = await run_to_end(manifest, tmp_path / "run", timeout=45)
    assert code == 0, [(j["id"], j["status"], j["failure"]) for j in run.state["jobs"]]
    oom = run.job("student_oom")
    assert oom["attempts"] == 2 and oom["history"][0]["failure_class"] == "cuda_oom"
    teach_end = max(run.job(j)["ended"] for j in ("teach_a", "teach_b"))
    assert min(run.job(j)["history"][0]["start"] for j in ("student_1", "student_oom")) \
        >= teach_end - 0.5
    assert (out / "teach_a.json").exists()
    counts = submissions(cluster, "sweep", run.engine.token)
    assert len(counts) == 5 and set(counts.values()) == {1}  # 4 jobs + 1 retry, once each
    assert (run.run_dir / "summary.md").exists()


@pytest.mark.integration
@needs_slurm
async def test_a_fifth_job_waits_for_resources_and_starts_when_a_gpu_frees(
        cluster: SlurmBed, tmp_path: Path) -> None:
    ids = [f"j{i}" for i in range(5)]
    jobs = [job(i, "fake-train --epochs 8 --epoch-seconds 0.4 --mem 2000") for i in ids]
    manifest = slurm_manifest(tmp_path, jobs, project="fifth", max_parallel=5)
    run = await start_engine(manifest, tmp_path / "run")

    def waiting() -> list[str]:  # all five are submitted at once: any of them may wait
        return [i for i in ids if run.engine.jobs[i].reason == "PENDING (Resources)"]

    try:
        await run.wait_for(lambda: bool(waiting()), timeout=20)
        [waiter] = waiting()
        session = run.engine.jobs[waiter].history[0].session
        assert squeue_states(cluster, session)[session] == "PENDING|Resources"
        assert run.engine.jobs[waiter].status == "running"  # submitted; Slurm holds it
        host = run.engine.hosts["slurm"]
        assert isinstance(host, SlurmHost)
        assert [(n["node"], n["gpus_used"], n["gpus_total"]) for n in await host.node_gpus()] \
            == [(cluster.node, 4, 4)]
        assert run.task is not None
        assert await asyncio.wait_for(asyncio.shield(run.task), 40) == 0
    finally:
        await _stop(run)
    first_end = min(run.job(i)["ended"] for i in ids if i != waiter)
    assert run.job(waiter)["history"][0]["start"] >= first_end - 1.0
    assert run.job(waiter)["reason"] is None
    gpus = [json.loads(line)["gpu"] for line in (tmp_path / "sim" / "runs.jsonl")
            .read_text().splitlines() if '"start"' in line]
    assert set(gpus) == {0, 1, 2, 3}  # Slurm's CUDA_VISIBLE_DEVICES, not the engine's slot


@pytest.mark.integration
@needs_slurm
async def test_kill_from_the_ui_scancels_the_job(cluster: SlurmBed, tmp_path: Path) -> None:
    jobs = [job("long", "fake-train --epochs 200 --epoch-seconds 0.2 --mem 2000"),
            job("short", QUICK)]
    manifest = slurm_manifest(tmp_path, jobs, project="kill")
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: run.engine.jobs["long"].started is not None
                           and (run.engine.jobs["long"].last_line or "").startswith("epoch"),
                           timeout=20)
        session = run.engine.jobs["long"].history[0].session
        result = await run.engine.command("kill", ["long"])
        assert result["ok"], result
        assert run.task is not None
        assert await asyncio.wait_for(asyncio.shield(run.task), 30) == 1
    finally:
        await _stop(run)
    assert run.job("long")["status"] == "killed" and run.job("short")["status"] == "completed"
    await _until(lambda: squeue_states(cluster, session).get(session, "").startswith("CANCELLED"))


@pytest.mark.integration
@needs_slurm
async def test_engine_kill_9_and_restart_never_submits_twice(cluster: SlurmBed,
                                                             tmp_path: Path) -> None:
    cmd = "fake-train --epochs 5 --epoch-seconds 0.5 --mem 2000"
    ids = [f"r{i}" for i in range(6)]
    manifest_file = tmp_path / "slurm.yaml"
    state = tmp_path / "sim"
    init_sim_state(state, host="slurm", gpus=4, memory_mib=24576)
    manifest_file.write_text(json.dumps({
        "project": "restart", "poll": 0.3, "stale_grace_s": 1,
        "env": {"EQ_SIM_STATE": str(state),
                "PATH": f"{sim_bin_dir()}:/usr/local/bin:/usr/bin:/bin"},
        "hosts": [{"name": "cluster", "max_parallel": 6,
                   "slurm": {"partition": "gpu", "time": "00:05:00"}}],
        "jobs": [{"id": i, "cmd": cmd} for i in ids]}))
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "eq_tui", str(manifest_file), "--no-ui", "--run-dir",
            str(run_dir)]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await _until(lambda: (run_dir / "queue_state.json").exists(), timeout=20)
        token = json.loads((run_dir / "queue_state.json").read_text())["token"]
        await _until(lambda: sorted(s.split("|")[0] for s in
                                    squeue_states(cluster, f"eq_restart_{token}_").values())
                     == ["PENDING"] * 2 + ["RUNNING"] * 4, timeout=30)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    second = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, output.decode()[-2000:]
    final = json.loads((run_dir / "queue_state.json").read_text())
    assert {j["id"]: (j["status"], j["attempts"]) for j in final["jobs"]} \
        == {i: ("completed", 1) for i in ids}
    counts = submissions(cluster, "restart", final["token"])
    assert len(counts) == 6 and set(counts.values()) == {1}, counts


@pytest.mark.integration
@needs_slurm
async def test_submit_twice_under_one_name_reuses_the_first_job(cluster: SlurmBed,
                                                               tmp_path: Path) -> None:
    runner = LocalRunner(cluster.env)
    stdin = b"0\nsleep 5\nEQ_LAUNCH_END\n"
    first = await runner.run(script("slurm_submit.sh"), ["eq_twice_x_a1", str(tmp_path / "a"),
                                                         "--gres=gpu:1"], stdin=stdin)
    again = await runner.run(script("slurm_submit.sh"), ["eq_twice_x_a1", str(tmp_path / "b"),
                                                         "--gres=gpu:1"], stdin=stdin)
    assert first.returncode == 0 and again.returncode == 0, (first, again)
    assert first.stdout == again.stdout and not (tmp_path / "b").exists()
    assert (tmp_path / "a" / "slurm_job_id").read_bytes() == first.stdout
    refused = await runner.run(script("slurm_submit.sh"), ["eq_twice_y_a1", str(tmp_path / "a")],
                               stdin=stdin)
    assert refused.returncode == 3


@pytest.mark.integration
@needs_slurm
async def test_a_job_over_its_memory_limit_shows_host_oom(cluster: SlurmBed,
                                                          tmp_path: Path) -> None:
    hog = ("python3 -c 'import time; x = bytearray(400 * 2**20); "
           "[time.sleep(0.2) for _ in range(50)]'")
    manifest = slurm_manifest(tmp_path, [job("hog", hog)], project="hostoom", mem="100M")
    code, run = await run_to_end(manifest, tmp_path / "run", timeout=40)
    hog_state = run.job("hog")
    assert code == 1 and hog_state["status"] == "stuck", hog_state
    assert hog_state["failure"]["class"] == "host_oom", hog_state["failure"]
    assert hog_state["attempts"] == 1


async def _until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)


async def _stop(run: EngineRun) -> None:
    if run.task is not None and not run.task.done():
        await run.stop()


