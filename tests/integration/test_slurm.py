"""The Slurm host against a real single-node Slurm (munged, slurmctld, slurmd; 4 fake GPUs),
driven by a real Engine. Jobs are the sim's fake-train; Slurm sets CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.events import HostProbed
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, AttemptRef, ProbeRequest
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.runner import CommandResult
from eq_tui.hosts.shell_protocol import script
from eq_tui.hosts.slurm import EXIT_RECORD_GRACE_S, NODES_EVERY_S, SlurmHost, sbatch_options
from eq_tui.hosts.slurm_parse import (
    SlurmJob,
    attempt_from_slurm,
    expand_hostlist,
    needs_lookup,
    parse_nodes,
    parse_sacct,
    parse_squeue,
)
from eq_tui.manifest.model import (
    EnvVar,
    HostSpec,
    JobSpec,
    Manifest,
    PhaseSpec,
    SlurmSpec,
)
from eq_tui.results.cost import job_cost
from eq_tui.sim.state import init_sim_state, sim_bin_dir
from tests.support.attempt_times import assert_host_times
from tests.support.engine_run import EngineRun, job, make_manifest, run_to_end, start_engine
from tests.support.ground_truth import launches_per_job
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
    from eq_tui.api.model import FailureClass
    from eq_tui.engine.tick.classify import classify_failure

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


# `scontrol show node -o -d` as Slurm 22.05 prints it on a real cluster (one node a line; OS and
# Reason hold spaces; typed GPUs with socket and index annotations).
_OS = "OS=Linux 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023"
_TAIL = ("RealMemory=515000 AllocMem=240000 FreeMem=200000 Sockets=2 Boards=1 {state} "
         "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A {parts} "
         "BootTime=2026-11-01T08:00:00 SlurmdStartTime=2026-11-01T08:01:00 "
         "LastBusyTime=2026-11-22T23:10:00 CfgTRES=cpu=64,mem=515000M,billing=64,gres/gpu=4 "
         "AllocTRES=cpu=48,mem=240000M,gres/gpu=3 CapWatts=n/a CurrentWatts=0 AveWatts=0 "
         "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")


def scontrol_node(name: str, gres: str, used: str, state: str, parts: str = "gpu",
                  reason: str = "") -> str:
    return (f"NodeName={name} Arch=x86_64 CoresPerSocket=32 CPUAlloc=48 CPUEfctv=64 CPUTot=64 "
            f"CPULoad=40.12 AvailableFeatures=a100,ib ActiveFeatures=a100,ib Gres={gres} "
            f"GresDrain=N/A GresUsed={used} NodeAddr={name} NodeHostName={name} "
            f"Version=22.05.8 {_OS} "
            + _TAIL.format(state=f"State={state}", parts=f"Partitions={parts}")
            + (f" Reason={reason}" if reason else ""))


SCONTROL_NODES = "\n".join([
    scontrol_node("gpu01", "gpu:a100:4(S:0-1)", "gpu:a100:3(IDX:0-2)", "MIXED", "gpu,preempt"),
    scontrol_node("gpu02", "gpu:a100:4(S:0-1)", "gpu:2(IDX:0-1)", "MIXED+DRAIN",
                  reason="bad ECC on GPU 3 [admin@2026-11-20T10:00:00]"),
    scontrol_node("gpu03", "gpu:a100:4(S:0-1)", "gpu:a100:0(IDX:N/A)", "IDLE"),
    scontrol_node("gpu04", "gpu:a100:2(S:0),gpu:v100:2(S:1)",
                  "gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)", "ALLOCATED"),
    scontrol_node("gpu05", "gpu:4", "gpu:0", "DOWN*+DRAIN", reason="Not responding"),
    scontrol_node("cpu01", "(null)", "(null)", "IDLE", "cpu"),
]) + "\n"


def test_node_gres_allocation_from_real_scontrol_output() -> None:
    nodes = parse_nodes(SCONTROL_NODES, "gpu")
    assert [(n.node, n.state, n.gpus_used, n.gpus_total) for n in nodes] == [
        ("gpu01", "MIXED", 3, 4), ("gpu02", "MIXED+DRAIN", 2, 4), ("gpu03", "IDLE", 0, 4),
        ("gpu04", "ALLOCATED", 3, 4), ("gpu05", "DOWN*+DRAIN", 0, 4)]
    assert nodes[0].partitions == ("gpu", "preempt")
    assert [n.node for n in parse_nodes(SCONTROL_NODES)][-1] == "cpu01"  # no partition: all
    assert parse_nodes(SCONTROL_NODES, "preempt")[0].node == "gpu01"
    assert parse_nodes("NodeName=n Gres=gpu GresUsed=gpu:a100 Partitions=p", "p")[0] \
        .gpus_used == 1  # a bare name is one GPU


def test_squeue_node_lists_are_expanded() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ("gpu01", "gpu02", "gpu03", "gpu07",
                                                        "login1")
    assert expand_hostlist("n[8-11]") == ("n8", "n9", "n10", "n11")
    text = ("51|eq_p_t_a_a1|RUNNING|None|gpu[01-02]\n52|eq_p_t_b_a1|PENDING|Resources|\n"
            "53|eq_p_t_c_a1|RUNNING|None|gpu03\n")
    jobs = parse_squeue(text, "eq_p_t_")
    assert jobs["eq_p_t_a_a1"].nodes == ("gpu01", "gpu02")
    assert jobs["eq_p_t_b_a1"].nodes == () and jobs["eq_p_t_b_a1"].reason == "Resources"
    assert jobs["eq_p_t_c_a1"].nodes == ("gpu03",)


def test_sbatch_never_lets_slurm_requeue_on_its_own() -> None:
    options = sbatch_options(SlurmSpec(partition="gpu", sbatch_args=("--requeue",)), 2)
    assert options[:2] == ["--gres=gpu:2", "--no-requeue"]
    assert options[-1] == "--requeue"  # the user's own sbatch_args come last and win


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


async def test_completed_without_a_visible_exit_record_waits_before_it_is_lost(
        tmp_path: Path) -> None:
    """A shared filesystem may show the exit record late: a COMPLETED job is not lost (and so
    not run twice) until EXIT_RECORD_GRACE_S has passed without it."""
    now = [1000.0]
    attempt = tmp_path / "a1"
    attempt.mkdir()
    (attempt / "slurm_job_id").write_text("41\n")
    runner = FakeSlurmRunner(fake_slurm_bin(tmp_path, squeue="41|eq_p_t_j_a1|COMPLETED|None|n1"))
    host = SlurmHost("c", runner, SlurmSpec(), slots=range(1), clock=lambda: now[0])
    request = ProbeRequest(attempts=(AttemptRef("j", "eq_p_t_j_a1", str(attempt), None),))
    waiting = (await host.probe(request)).attempts["j"]
    assert waiting.session_alive and waiting.exit_code is None
    assert "waiting for its exit record" in waiting.detail
    assert host.lookups == 0  # squeue said how it ended: no sacct round trip while waiting
    now[0] += EXIT_RECORD_GRACE_S - 1
    assert (await host.probe(request)).attempts["j"].session_alive
    (attempt / "exit").write_text("0\n")  # the record shows up: judged as usual
    assert (await host.probe(request)).attempts["j"].exit_code == 0
    (attempt / "exit").unlink()
    now[0] += EXIT_RECORD_GRACE_S  # a fresh wait: the clock restarted once the record showed
    assert (await host.probe(request)).attempts["j"].session_alive
    now[0] += EXIT_RECORD_GRACE_S
    lost = (await host.probe(request)).attempts["j"]
    assert (lost.session_alive, lost.pid_alive, lost.exit_code) == (False, False, None)


async def test_the_probe_lists_the_partitions_nodes_with_our_jobs_in_the_same_round_trip(
        tmp_path: Path) -> None:
    now = [0.0]
    bin_dir = fake_slurm_bin(tmp_path, squeue="")
    (tmp_path / "nodes.txt").write_text(SCONTROL_NODES)
    # squeue: j runs across gpu01-02, k waits, l runs on gpu04; scontrol counts its calls
    (bin_dir / "squeue").write_text(
        "#!/bin/sh\nprintf '%s\\n' '61|eq_p_t_j_a1|RUNNING|None|gpu[01-02]' "
        "'62|eq_p_t_k_a1|PENDING|Priority|' '63|eq_p_t_l_a1|RUNNING|None|gpu04' "
        "'64|someone_else|RUNNING|None|gpu03'\n")
    (bin_dir / "scontrol").write_text(
        f"#!/bin/sh\necho x >> {tmp_path}/scontrol.calls\ncat {tmp_path}/nodes.txt\n")
    runner = FakeSlurmRunner(bin_dir)
    host = SlurmHost("c", runner, SlurmSpec(partition="gpu"), slots=range(4),
                     clock=lambda: now[0])
    refs = []
    for key in ("j", "k", "l"):
        (tmp_path / key).mkdir()
        refs.append(AttemptRef(key, f"eq_p_t_{key}_a1", str(tmp_path / key), None))
    request = ProbeRequest(attempts=tuple(refs))
    calls: list[str] = []
    real_run = runner.run

    async def counting_run(script_text: str, args: Sequence[str] = (), **kwargs: Any
                           ) -> CommandResult:
        calls.append(script_text[:40])
        return await real_run(script_text, args, **kwargs)

    runner.run = counting_run  # type: ignore[method-assign]
    snap = await host.probe(request)
    assert snap.ok, snap.error
    assert len(calls) == 1  # squeue, scontrol and the attempt files: one round trip
    assert [(n.name, n.state, n.gpus_used, n.gpus_total, n.jobs) for n in snap.nodes] == [
        ("gpu01", "MIXED", 3, 4, ("j",)), ("gpu02", "MIXED+DRAIN", 2, 4, ("j",)),
        ("gpu03", "IDLE", 0, 4, ()), ("gpu04", "ALLOCATED", 3, 4, ("l",)),
        ("gpu05", "DOWN*+DRAIN", 0, 4, ())]
    assert snap.attempts["k"].detail == "PENDING (Priority)"
    # within NODES_EVERY_S the node list is the last one; our jobs' placement is fresh
    (bin_dir / "squeue").write_text(
        "#!/bin/sh\necho '61|eq_p_t_j_a1|RUNNING|None|gpu[01-02]'\n"
        "echo '62|eq_p_t_k_a1|RUNNING|None|gpu03'\necho '63|eq_p_t_l_a1|RUNNING|None|gpu04'\n")
    now[0] += NODES_EVERY_S / 2
    snap = await host.probe(request)
    assert (tmp_path / "scontrol.calls").read_text().count("x") == 1
    assert [n.jobs for n in snap.nodes][:3] == [("j",), ("j",), ("k",)]
    now[0] += NODES_EVERY_S
    await host.probe(request)
    assert (tmp_path / "scontrol.calls").read_text().count("x") == 2
    assert len(calls) == 3


async def test_only_the_partitions_nodes_cross_the_wire(tmp_path: Path) -> None:
    bin_dir = fake_slurm_bin(tmp_path)
    (tmp_path / "nodes.txt").write_text(SCONTROL_NODES)
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat {tmp_path}/nodes.txt\n")
    runner = FakeSlurmRunner(bin_dir)
    out = await runner.run(script("slurm_queue.sh"), ["-", "eq_", "0", "@@b", "preempt", "1"])
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "@@b slurm" and lines[-1] == "@@b nodes_rc 0"
    assert [line.split()[0] for line in lines if line.startswith("NodeName=")] \
        == ["NodeName=gpu01"]
    quiet = await runner.run(script("slurm_queue.sh"), ["-", "eq_", "0", "@@b", "gpu", "0"])
    assert "NodeName" not in quiet.stdout.decode()


async def test_a_failing_node_list_is_one_standing_warning_not_a_failed_probe(
        tmp_path: Path) -> None:
    now = [0.0]
    bin_dir = fake_slurm_bin(tmp_path)
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\n"
        "exit 1\n")
    host = SlurmHost("c", FakeSlurmRunner(bin_dir), SlurmSpec(partition="gpu"), slots=range(2),
                     clock=lambda: now[0])
    first = await host.probe(ProbeRequest())
    assert first.ok and first.nodes == ()
    assert first.warnings == ("node list unavailable: slurm_load_node error: Unable to contact "
                              "slurm controller",)
    now[0] += NODES_EVERY_S / 2  # not asked again yet: the warning stands
    assert (await host.probe(ProbeRequest())).warnings == first.warnings
    (tmp_path / "nodes.txt").write_text(SCONTROL_NODES)
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat {tmp_path}/nodes.txt\n")
    now[0] += NODES_EVERY_S
    fixed = await host.probe(ProbeRequest())
    assert fixed.warnings == () and len(fixed.nodes) == 5


def test_host_probed_nodes_survive_the_control_socket_json() -> None:
    from eq_tui.api.events import HostProbed, event_from_json

    node = {"name": "gpu01", "state": "MIXED", "gpus_used": 3, "gpus_total": 4, "jobs": ["j"]}
    event = HostProbed(project="p", at=1.0, host="c", ok=True, nodes=(node,))
    again = event_from_json(json.loads(json.dumps(event.to_json())))
    assert again == event and isinstance(again, HostProbed) and again.nodes == (node,)


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


def queued_submissions(bed: SlurmBed, prefix: str) -> dict[str, int]:
    """How many Slurm jobs (any state squeue still shows: pending, running and those ended
    within MinJobAge) each job name starting with prefix has: a second submission under one
    name counts twice here, whether or not it has finished."""
    out = bed.run("squeue", "-h", "-t", "all", "-o", "%j", check=False)
    counts: dict[str, int] = {}
    for name in out.split():
        if name.startswith(prefix):
            counts[name] = counts.get(name, 0) + 1
    return counts


ENDED = ("CANCELLED", "COMPLETED", "FAILED")  # how a stopped job's Slurm record may end


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
    # what they cost: a Slurm GPU is a placeholder with no readings, so GPU-seconds (its time)
    # but energy unknown, never 0
    for record in run.state["jobs"]:
        gpu_s, energy = job_cost(record["history"])
        assert gpu_s > 0 and energy is None, record["id"]
    summary = (run.run_dir / "summary.md").read_text()
    assert "- energy: unknown (no power reading: a Slurm GPU" in summary


@pytest.mark.integration
@needs_slurm
async def test_a_fifth_job_waits_for_resources_and_starts_when_a_gpu_frees(
        cluster: SlurmBed, tmp_path: Path) -> None:
    ids = [f"j{i}" for i in range(5)]
    jobs = [job(i, "fake-train --epochs 8 --epoch-seconds 0.4 --mem 2000") for i in ids]
    # all five submitted at once (the crash guard, on by default, costs a healthy sweep nothing)
    manifest = slurm_manifest(tmp_path, jobs, project="fifth", max_parallel=5)
    run = await start_engine(manifest, tmp_path / "run")
    host = run.engine.hosts["slurm"]
    assert isinstance(host, SlurmHost)
    host.nodes_every_s = 0  # the node list every probe: the test looks at it mid-run

    def nodes() -> list[tuple[str, str, int, int, int]]:
        [entry] = run.engine.snapshot()["hosts"]
        return [(n["name"], n["state"], n["gpus_used"], n["gpus_total"], len(n["jobs"]))
                for n in entry["nodes"]]

    def waiting() -> list[str]:  # all five are submitted at once: any of them may wait
        return [i for i in ids if run.engine.jobs[i].reason == "PENDING (Resources)"]

    try:
        await run.wait_for(lambda: bool(waiting()), timeout=20)
        [waiter] = waiting()
        session = run.engine.jobs[waiter].history[0].session
        assert squeue_states(cluster, session)[session] == "PENDING|Resources"
        assert run.engine.jobs[waiter].status == "running"  # submitted; Slurm holds it
        # the grid's node line: all 4 GPUs allocated, to the 4 of ours that run
        await run.wait_for(lambda: nodes() == [(cluster.node, "ALLOCATED", 4, 4, 4)]
                           or nodes() == [(cluster.node, "MIXED", 4, 4, 4)], timeout=20)
        [entry] = run.engine.snapshot()["hosts"]
        assert waiter not in entry["nodes"][0]["jobs"]
        probed = [e for e in run.events if isinstance(e, HostProbed) and e.nodes]
        assert probed and probed[-1].nodes[0]["name"] == cluster.node
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
async def test_kill_from_the_ui_scancels_the_job(cluster: SlurmBed, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The UI attached over the control socket (as `eq-tui attach` is): the node line shows
    the job on its node, then `k` and `y` on its row scancel it."""
    from eq_tui.api.control_client import ControlClient
    from eq_tui.tui.app import EqTuiApp
    from eq_tui.tui.gpu_grid import HostPanel
    from eq_tui.tui.job_table import JobTable
    from eq_tui.tui.screens.confirm import ConfirmScreen

    monkeypatch.setenv("EQ_TUI_CONFIG_DIR", str(tmp_path / "config"))
    jobs = [job("long", "fake-train --epochs 200 --epoch-seconds 0.2 --mem 2000"),
            job("short", QUICK)]
    manifest = slurm_manifest(tmp_path, jobs, project="kill")
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    host = run.engine.hosts["slurm"]
    assert isinstance(host, SlurmHost)
    host.nodes_every_s = 0
    client = await ControlClient.connect(tmp_path / "run")
    app = EqTuiApp([client])

    def status(job_id: str) -> str:
        return str(app.query_one(JobTable).get_cell(f"kill/{job_id}", "status"))

    def node_line() -> str:
        panel = app.query_one(HostPanel)
        return next((line for line in str(panel.render()).splitlines()
                     if line.startswith(cluster.node)), "")

    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(lambda: status("long") == "running"
                         and run.engine.jobs["long"].last_line.startswith("epoch")
                         and "long" in node_line(), timeout=30)
            assert "/4" in node_line()
            session = run.engine.jobs["long"].history[0].session
            table = app.query_one(JobTable)
            table.move_cursor(row=table.get_row_index("kill/long"))
            table.focus()
            await pilot.press("k")
            assert isinstance(app.screen, ConfirmScreen) and "long" in app.screen.title_text
            await pilot.press("y")
            await _until(lambda: status("long") == "killed", timeout=20)
            await _until(lambda: "long" not in node_line(), timeout=20)
            await _until(lambda: status("short") == "completed", timeout=30)
    finally:
        await client.close()
        await _stop(run)
    assert run.job("long")["status"] == "killed" and run.job("short")["status"] == "completed"
    assert run.job("long")["failure"]["class"] == "killed"
    # a stop lets the job end on its SIGTERM (`scancel --signal`): Slurm has it ended, by its
    # own exit within the grace or cancelled after it
    await _until(lambda: squeue_states(cluster, session).get(session, "").startswith(ENDED))
    assert submissions(cluster, "kill", run.engine.token) == {
        session: 1, run.engine.jobs["short"].history[0].session: 1}


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
        "crash_guard": False,  # all six submitted at once, no probation
        "env": {"EQ_SIM_STATE": str(state),
                "PATH": f"{sim_bin_dir()}:/usr/local/bin:/usr/bin:/bin"},
        "hosts": [{"name": "cluster", "max_parallel": 6,
                   "slurm": {"partition": "gpu", "time": "00:05:00"}}],
        # a seed each: six copies of one command are refused as waste
        "jobs": [{"id": i, "cmd": f"{cmd} --seed {n}"} for n, i in enumerate(ids)]}))
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
    queued = queued_submissions(cluster, f"eq_restart_{final['token']}_")
    assert len(queued) == 6 and set(queued.values()) == {1}, queued
    # and from the fake jobs themselves: each one's process reached its GPU once
    assert launches_per_job([state]) == dict.fromkeys(ids, 1)


@pytest.mark.integration
@needs_slurm
async def test_submit_twice_under_one_name_reuses_the_first_job(cluster: SlurmBed,
                                                               tmp_path: Path) -> None:
    runner = LocalRunner(cluster.env)
    stdin = b"0\nsleep 5\nEQ_LAUNCH_END\n"
    name = f"eq_twice_{secrets.token_hex(3)}_a1"  # the cluster outlives a run: a name of its own
    first = await runner.run(script("slurm_submit.sh"), [name, str(tmp_path / "a"),
                                                         "--gres=gpu:1"], stdin=stdin)
    again = await runner.run(script("slurm_submit.sh"), [name, str(tmp_path / "b"),
                                                         "--gres=gpu:1"], stdin=stdin)
    assert first.returncode == 0 and again.returncode == 0, (first, again)
    assert first.stdout == again.stdout and not (tmp_path / "b").exists()
    assert (tmp_path / "a" / "slurm_job_id").read_bytes() == first.stdout
    refused = await runner.run(script("slurm_submit.sh"), ["eq_twice_y_a1", str(tmp_path / "a")],
                               stdin=stdin)
    assert refused.returncode == 3


@pytest.mark.integration
@needs_slurm
async def test_a_run_dir_with_percent_signs_keeps_its_logs_and_secrets_stay_off_disk(
        cluster: SlurmBed, tmp_path: Path) -> None:
    """sbatch expands %j in --output: the path is escaped, so the log lands in the attempt dir.
    A secret reaches the job through sbatch's environment, never a file or Slurm's job record;
    and Slurm may not requeue the job by itself."""
    secret = "hunter2-eq-tui-slurm-secret"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    check = f'test "$(printf %s "$API_KEY" | sha256sum | cut -c1-64)" = {digest}'
    manifest = slurm_manifest(tmp_path, [job("pct", f"{check} && {QUICK}")], project="pct")
    manifest = replace(manifest, env={**manifest.env, "API_KEY": EnvVar(secret, secret=True)})
    run_dir = tmp_path / "run 100%j %u"
    code, run = await run_to_end(manifest, run_dir, timeout=40)
    assert code == 0, run.job("pct")
    log = Path(run.job("pct")["log"])
    assert log.parent.is_dir() and "%j" in str(log) and "epoch 2/2" in log.read_text()
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_socket():
            assert secret.encode() not in path.read_bytes(), path
    job_id = (log.parent / "slurm_job_id").read_text().strip()
    record = cluster.run("scontrol", "show", "job", "-o", job_id)
    assert "Requeue=0" in record and secret not in record
    assert secret not in cluster.jobcomp.read_text()


@pytest.mark.integration
@needs_slurm
async def test_the_jobs_own_path_never_hides_the_tools_that_record_its_id(
        cluster: SlurmBed, tmp_path: Path) -> None:
    runner = LocalRunner(cluster.env)
    name = f"eq_path_{secrets.token_hex(3)}_a1"  # the cluster outlives a run: a name of its own
    stdin = b"1\nexport PATH=/nonexistent\necho \"$PATH\"\nEQ_LAUNCH_END\n"
    result = await runner.run(script("slurm_submit.sh"),
                              [name, str(tmp_path / "a"), "--gres=gpu:1"], stdin=stdin)
    assert result.returncode == 0, result
    assert (tmp_path / "a" / "slurm_job_id").read_bytes() == result.stdout
    assert f"JobName={name}" in cluster.run("scontrol", "show", "job", "-o",
                                            result.stdout.decode().strip())


@pytest.mark.integration
@needs_slurm
async def test_requeue_scancels_the_job_and_submits_a_new_attempt(cluster: SlurmBed,
                                                                  tmp_path: Path) -> None:
    long = "fake-train --epochs 200 --epoch-seconds 0.2 --mem 2000"
    manifest = slurm_manifest(tmp_path, [job("rq", f'[ "$EQ_ATTEMPT" = 2 ] && {QUICK} || {long}')],
                              project="requeue")
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: run.engine.jobs["rq"].last_line.startswith("epoch"),
                           timeout=30)
        first = run.engine.jobs["rq"].history[0].session
        result = await run.engine.command("requeue", ["rq"])
        assert result["ok"], result
        assert run.task is not None
        assert await asyncio.wait_for(asyncio.shield(run.task), 40) == 0
    finally:
        await _stop(run)
    state = run.job("rq")
    assert state["status"] == "completed" and state["attempts"] == 2
    assert state["history"][0]["failure_class"] == "requeued"
    await _until(lambda: squeue_states(cluster, first).get(first, "").startswith(ENDED))
    assert submissions(cluster, "requeue", run.engine.token) == {
        first: 1, run.engine.jobs["rq"].history[1].session: 1}


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




SAMPLE = Path(__file__).parent.parent.parent / "sample_manifests" / "slurm.yaml"


def _sample_copy(path: Path, *, simulate: bool = False) -> Path:
    """sample_manifests/slurm.yaml with shorter sleeps, poll and retry delay (each tuning
    must apply: a changed sample fails here instead of silently running slow); with
    `simulate`, the same jobs on a simulated 4-GPU host instead of Slurm."""
    text = SAMPLE.read_text()
    for old, new in (("sleep 1;", "sleep 0.3;"), ("delay: 3,", "delay: 1,"),
                     ("poll: 1\n", "poll: 0.5\n")):
        assert old in text, old
        text = text.replace(old, new)
    if simulate:
        slurm_host = next(line for line in text.splitlines() if line.strip().startswith("slurm:"))
        text = text.replace(slurm_host, "    simulate: {gpus: 4, memory_mib: 24576}")
    path.write_text(text)
    return path


def _run_dir_shape(run_dir: Path) -> dict[str, Any]:
    state = json.loads((run_dir / "queue_state.json").read_text())
    token = state["token"]
    jobs = state["jobs"]
    summary = (run_dir / "summary.md").read_text().splitlines()
    return {
        # less the simulated GPUs' state (an SSH run has none either)
        "files": sorted(p.name for p in run_dir.iterdir() if p.name not in ("engine.lock", "sim")),
        "state_keys": sorted(state),
        "job_keys": sorted({k for j in jobs for k in j}),
        "history_keys": sorted({k for j in jobs for a in j["history"] for k in a}),
        "logs": sorted(str(Path(j["log"]).relative_to(run_dir)).replace(token, "TOKEN")
                       for j in jobs),
        # the summary less its clock times and durations, and its energy: a Slurm GPU has
        # no power reading (tests/integration/test_slurm.py's cost test says so)
        "summary": _without_cost([re.sub(r"\d+s \|$", "Ns |", line) for line in summary
                                  if not line.startswith(("- start", "- end", "- wall-clock",
                                                          "- energy", "- GPU-hours",
                                                          "cost in all"))]),
    }


def _without_cost(lines: list[str]) -> list[str]:
    """The summary's results tables less their cost columns and what follows them (GPU time is
    timed; energy is unknown under Slurm, and the notes say so)."""
    out, cut = [], None
    for line in lines:
        cells = line.split("|")
        if not line.startswith("|"):
            cut = None
        elif "GPU time" in (names := [c.strip() for c in cells]):
            cut = names.index("GPU time")
        out.append("|".join(cells[:cut]) if cut is not None else line)
    return out


@pytest.mark.integration
@needs_slurm
async def test_the_sample_manifest_runs_to_the_end_under_the_cli_like_an_ssh_run(
        cluster: SlurmBed, tmp_path: Path) -> None:
    """`eq-tui sample_manifests/slurm.yaml --no-ui` (the real binary) on the test cluster: every
    job completes, each student once after a CUDA OOM; and the run dir, queue_state.json and
    summary.md have the shape of the same manifest run on a (simulated) GPU box, run beside it."""
    binary = Path(sys.executable).parent / "eq-tui"
    runs = {}
    for kind in ("slurm", "box"):
        manifest = _sample_copy(tmp_path / f"{kind}.yaml", simulate=kind == "box")
        runs[kind] = (tmp_path / f"run_{kind}", await asyncio.create_subprocess_exec(
            str(binary), str(manifest), "--no-ui", "--run-dir", str(tmp_path / f"run_{kind}"),
            env=cluster.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT))
    outputs = {kind: (await asyncio.wait_for(proc.communicate(), 90))[0].decode()
               for kind, (_run_dir, proc) in runs.items()}
    for kind, (_run_dir, proc) in runs.items():
        assert proc.returncode == 0, f"{kind}: {outputs[kind][-3000:]}"
    slurm_dir = runs["slurm"][0]
    jobs = json.loads((slurm_dir / "queue_state.json").read_text())["jobs"]
    # jq '.jobs | group_by(.status) | map({(.[0].status): length}) | add'
    by_status: dict[str, int] = {}
    for record in jobs:
        by_status[record["status"]] = by_status.get(record["status"], 0) + 1
    assert by_status == {"completed": 10}
    students = [j for j in jobs if j["phase"] == "students"]
    assert len(students) == 4 and all(
        j["attempts"] == 2 and [a["failure_class"] for a in j["history"]] == ["cuda_oom", None]
        for j in students), students
    assert all(j["attempts"] == 1 for j in jobs if j["phase"] == "teachers")
    assert all(j["host"] == "cluster" for j in jobs)
    assert (slurm_dir / "summary.md").exists()
    token = json.loads((slurm_dir / "queue_state.json").read_text())["token"]
    counts = submissions(cluster, "slurm_demo", token)
    assert len(counts) == 14 and set(counts.values()) == {1}, counts  # 10 jobs + 4 retries
    slurm_shape, box_shape = _run_dir_shape(slurm_dir), _run_dir_shape(runs["box"][0])
    for key, value in box_shape.items():
        assert slurm_shape[key] == value, key


@pytest.mark.integration
@needs_slurm
async def test_every_attempt_has_the_times_its_batch_script_recorded(cluster: SlurmBed,
                                                                    tmp_path: Path) -> None:
    """Jobs that exit at once included: the start is the wrapper's on the node, never sbatch's
    return on the engine's clock, and no end comes before it."""
    jobs = [job("ok", "true"), job("bad", "false"), job("train", QUICK)]
    manifest = slurm_manifest(tmp_path, jobs, project="times")
    _, run = await run_to_end(manifest, tmp_path / "run", timeout=40)
    states = run.state["jobs"]
    assert {j["id"]: j["status"] for j in states} == {
        "ok": "completed", "bad": "stuck", "train": "completed"}
    assert_host_times(states)
