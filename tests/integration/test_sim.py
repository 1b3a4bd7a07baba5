"""The simulated GPUs: the fake nvidia-smi and fake-train, run as real subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.model import FailureClass
from eq_tui.engine.tick.classify import classify_failure
from eq_tui.sim.state import (
    find_overlaps,
    init_sim_state,
    read_runs,
    run_intervals,
    set_foreign,
    set_quirk,
    sim_bin_dir,
)

BIN = sim_bin_dir()
NVSMI = str(BIN / "nvidia-smi")
TRAIN = str(BIN / "fake-train")
GPU_QUERY = [NVSMI, "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu",
             "--format=csv,noheader,nounits"]
APPS_QUERY = [NVSMI, "--query-compute-apps=pid,gpu_uuid,used_memory",
              "--format=csv,noheader,nounits"]
FAST = ["--epoch-seconds", "0.05", "--epochs", "2"]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class Sim:
    def __init__(self, state: Path) -> None:
        self.state = state
        self.procs: list[subprocess.Popen[str]] = []
        self.extra_pids: list[int] = []
        self.env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        # The venv's python first, so the scripts' `env python3` starts fast and predictably.
        self.env["PATH"] = f"{BIN}:{Path(sys.executable).parent}:/usr/bin:/bin"
        self.env["EQ_SIM_STATE"] = str(state)

    def env_for(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}

    def run(self, cmd: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, env=self.env_for(**env), capture_output=True, text=True,
                              timeout=30)

    def smi(self, *args: str) -> str:
        result = self.run([NVSMI, *args])
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def gpus(self) -> list[list[str]]:
        return [line.split(", ") for line in self.run(GPU_QUERY).stdout.splitlines()]

    def used(self, gpu: int) -> int:
        return int(self.gpus()[gpu][3])

    def apps(self) -> list[tuple[int, str, int]]:
        lines = self.run(APPS_QUERY).stdout.splitlines()
        return [(int(p), u, int(m)) for p, u, m in (line.split(", ") for line in lines)]

    def train(self, *args: str, gpu: str = "0", **env: str) -> subprocess.CompletedProcess[str]:
        return self.run([TRAIN, *args], CUDA_VISIBLE_DEVICES=gpu, **env)

    def start(self, *args: str, gpu: str = "0", **env: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([TRAIN, *args], env=self.env_for(CUDA_VISIBLE_DEVICES=gpu, **env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
        for pid in self.extra_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    state = init_sim_state(tmp_path / "state", host="hostA", gpus=2, memory_mib=24576,
                           model="NVIDIA Simulated GPU")
    s = Sim(state)
    yield s
    s.cleanup()


def test_idle_gpus(sim: Sim) -> None:
    out = sim.smi(*GPU_QUERY[1:])
    assert out == ("0, GPU-sim-hostA-0, NVIDIA Simulated GPU, 0, 24576, 0\n"
                   "1, GPU-sim-hostA-1, NVIDIA Simulated GPU, 0, 24576, 0\n")
    assert sim.smi(*APPS_QUERY[1:]) == ""
    assert sim.smi("-L").splitlines() == [
        "GPU 0: NVIDIA Simulated GPU (UUID: GPU-sim-hostA-0)",
        "GPU 1: NVIDIA Simulated GPU (UUID: GPU-sim-hostA-1)",
    ]
    assert "NVIDIA Simulated GPU" in sim.smi()


def test_field_order_header_and_units(sim: Sim, tmp_path: Path) -> None:
    init_sim_state(sim.state, host="hostA", gpus=1, memory_mib=8192, base_mib=5)
    assert sim.smi("--query-gpu=memory.total,index,memory.used", "--format=csv") == (
        "memory.total [MiB], index, memory.used [MiB]\n8192 MiB, 0, 5 MiB\n")
    assert sim.smi("--query-gpu=utilization.gpu", "--format=csv,noheader") == "0 %\n"
    assert sim.smi("--query-gpu", "uuid", "--format", "csv,noheader") == "GPU-sim-hostA-0\n"
    bad = sim.run([NVSMI, "--query-gpu=index,bogus", "--format=csv"])
    assert bad.returncode == 2 and "bogus" in bad.stdout


def test_uuids_unique_per_host(sim: Sim, tmp_path: Path) -> None:
    other = Sim(init_sim_state(tmp_path / "b", host="hostB", gpus=2, memory_mib=1024))
    uuids = [row[1] for row in sim.gpus()] + [row[1] for row in other.gpus()]
    assert len(set(uuids)) == 4
    assert [row[1] for row in sim.gpus()] == uuids[:2]  # stable


def test_running_job_holds_memory_then_releases(sim: Sim) -> None:
    proc = sim.start("--mem", "3000", "--epochs", "100", "--epoch-seconds", "0.05", gpu="1")
    wait_until(lambda: sim.used(1) == 3000)
    row = sim.gpus()[1]
    assert int(row[5]) >= 90
    assert sim.gpus()[0][3:] == ["0", "24576", "0"]
    assert sim.apps() == [(proc.pid, "GPU-sim-hostA-1", 3000)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert sim.used(1) == 0 and sim.apps() == []
    end = [e for e in read_runs(sim.state) if e["event"] == "end"]
    assert end[0]["exit"] == 128 + signal.SIGTERM and end[0]["pid"] == proc.pid


def test_cuda_visible_devices_does_not_affect_nvidia_smi(sim: Sim) -> None:
    result = sim.run(GPU_QUERY, CUDA_VISIBLE_DEVICES="1")
    assert len(result.stdout.splitlines()) == 2


def test_linger_keeps_memory_after_exit_then_drops(sim: Sim) -> None:
    result = sim.train(*FAST, "--mem", "1500", "--linger", "1.5", EQ_JOB_ID="j1")
    assert result.returncode == 0, result.stderr
    assert "epoch 2/2 loss=" in result.stdout
    pids = [p for p, _, _ in sim.apps()]
    assert sim.used(0) == 1500, "memory should still be held right after exit"
    assert int(sim.gpus()[0][5]) == 0, "lingering memory computes nothing"
    wait_until(lambda: sim.used(0) == 0, timeout=5)
    assert sim.apps() == []
    assert list((sim.state / "procs").glob(f"{pids[0]}-*.json")) == []


def test_linger_from_config(sim: Sim) -> None:
    init_sim_state(sim.state, host="hostA", gpus=1, memory_mib=4096, linger_s=30)
    assert sim.train(*FAST, "--mem", "1000").returncode == 0
    assert sim.used(0) == 1000
    assert sim.train(*FAST, "--mem", "1000", "--linger", "0").returncode == 0
    assert sim.used(0) == 1000  # the second job released at once; the first still lingers


def test_overflow_raises_torch_oom(sim: Sim) -> None:
    set_foreign(sim.state, [{"gpu": 0, "mib": 23000}])
    assert sim.apps() == [(4000000, "GPU-sim-hostA-0", 23000)]
    result = sim.train(*FAST, "--mem", "2048", EQ_JOB_ID="big")
    assert result.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." \
        in result.stderr
    assert "GPU 0 has a total capacity of 24.00 GiB of which 1.54 GiB is free" in result.stderr
    assert classify_failure(1, result.stdout + result.stderr).cls is FailureClass.CUDA_OOM
    assert [e["event"] for e in read_runs(sim.state)] == ["oom"]
    assert sim.used(0) == 23000
    assert sim.train(*FAST, "--mem", "2048", gpu="1").returncode == 0


def test_overflow_from_another_job(sim: Sim) -> None:
    init_sim_state(sim.state, host="hostA", gpus=1, memory_mib=8000, base_mib=100)
    holder = sim.start("--mem", "6000", "--epochs", "100", "--epoch-seconds", "0.05")
    wait_until(lambda: sim.used(0) == 6100)
    assert sim.train(*FAST, "--mem", "2000").returncode == 1
    assert sim.train(*FAST, "--mem", "1900").returncode == 0
    holder.terminate()
    holder.wait(timeout=10)


def test_concurrent_starts_never_overcommit(sim: Sim) -> None:
    init_sim_state(sim.state, host="hostA", gpus=1, memory_mib=8000)
    procs = [sim.start("--mem", "3000", "--epochs", "1000", "--epoch-seconds", "0.05")
             for _ in range(4)]
    wait_until(lambda: len(read_runs(sim.state)) == 4)
    events = [e["event"] for e in read_runs(sim.state)]
    assert sorted(events) == ["oom", "oom", "start", "start"]
    assert sim.used(0) == 6000
    # the two that ran out of memory exit 1 on their own (after their OOM record is written)
    wait_until(lambda: sum(1 for p in procs if p.poll() is not None) == 2)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    assert sorted(p.wait(timeout=10) for p in procs) == [-signal.SIGTERM] * 2 + [1, 1]


@pytest.mark.parametrize(("attempt", "code"), [("1", 1), ("2", 0)])
def test_oom_attempts(sim: Sim, attempt: str, code: int) -> None:
    result = sim.train(*FAST, "--oom-attempts", "1", EQ_ATTEMPT=attempt, EQ_JOB_ID="j")
    assert result.returncode == code
    assert ("torch.OutOfMemoryError" in result.stderr) == (code == 1)
    assert read_runs(sim.state)[0]["attempt"] == int(attempt)


def test_oom_probability_is_seeded(sim: Sim) -> None:
    assert sim.train(*FAST, "--oom-prob", "1").returncode == 1
    assert sim.train(*FAST, "--oom-prob", "0").returncode == 0
    first = [sim.train("--epochs", "0", "--oom-prob", "0.5", "--seed", str(s)).returncode
             for s in range(3)]
    again = [sim.train("--epochs", "0", "--oom-prob", "0.5", "--seed", str(s)).returncode
             for s in range(3)]
    assert first == again


def test_host_oom_is_sigkill_without_traceback(sim: Sim) -> None:
    direct = sim.train(*FAST, "--host-oom")
    assert direct.returncode == -signal.SIGKILL
    assert "Traceback" not in direct.stdout + direct.stderr
    # A trailing command keeps sh from exec-ing the job, so sh reports the status itself.
    shell = sim.run(["sh", "-c", f'{TRAIN} --epoch-seconds 0.05 --host-oom; exit $?'],
                    CUDA_VISIBLE_DEVICES="0")
    assert shell.returncode == 137
    assert classify_failure(137, shell.stdout + shell.stderr).cls is FailureClass.HOST_OOM
    assert sim.used(0) == 0
    assert [e.get("exit") for e in read_runs(sim.state) if e["event"] == "end"] == [137, 137]


def test_exit_code_and_output(sim: Sim, tmp_path: Path) -> None:
    failed = sim.train(*FAST, "--exit-code", "3", "--output", str(tmp_path / "o" / "m.json"))
    assert failed.returncode == 3 and "ValueError: loss is nan" in failed.stderr
    assert not (tmp_path / "o").exists()
    out = tmp_path / "deep" / "dir" / "m.json"
    ok = sim.train(*FAST, "--output", str(out), "--message", "hello there", EQ_JOB_ID="s1",
                   EQ_ATTEMPT="2")
    assert ok.returncode == 0 and ok.stdout.startswith("hello there\n")
    metrics = json.loads(out.read_text())
    assert metrics["job"] == "s1" and metrics["epochs"] == 2 and metrics["attempt"] == 2
    assert isinstance(metrics["final_loss"], float)


@pytest.mark.parametrize(("flag", "signature", "cls"), [
    ("--nccl", "Watchdog caught collective operation timeout", FailureClass.NCCL),
    ("--disk-full", "OSError: [Errno 28] No space left on device", FailureClass.DISK_FULL),
    ("--xid", "Xid 79 GPU has fallen off the bus", FailureClass.GPU_FAULT),
])
def test_fault_signatures(sim: Sim, flag: str, signature: str, cls: FailureClass) -> None:
    result = sim.train(*FAST, flag)
    assert result.returncode == 1 and signature in result.stderr
    assert classify_failure(1, result.stdout + result.stderr).cls is cls
    assert sim.used(0) == 0


def test_usage_errors(sim: Sim) -> None:
    no_gpu = sim.train(*FAST, gpu="")
    assert no_gpu.returncode == 1 and "RuntimeError: No CUDA GPUs are available" in no_gpu.stderr
    assert sim.train(*FAST, gpu="7").returncode == 1
    assert sim.train(*FAST, gpu="GPU-sim-hostA-1").returncode == 0
    env = {k: v for k, v in sim.env.items() if k != "EQ_SIM_STATE"}
    missing = subprocess.run([TRAIN], env=env, capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "EQ_SIM_STATE" in missing.stderr


def test_stale_child_keeps_stdout_open_but_holds_no_memory(sim: Sim, tmp_path: Path) -> None:
    log = tmp_path / "log"
    with log.open("w") as fh:
        proc = subprocess.Popen([TRAIN, *FAST, "--stale-child", "--stale-child-seconds", "60"],
                                env=sim.env_for(CUDA_VISIBLE_DEVICES="0"), stdout=fh,
                                stderr=subprocess.STDOUT)
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        line = wait_until(lambda: [ln for ln in log.read_text().splitlines() if "pid=" in ln
                                   and "worker" in ln])
        child = int(line[0].rsplit("pid=", 1)[1].split()[0])
        sim.extra_pids.append(child)
    os.kill(child, 0)  # still alive after its parent exited
    assert os.getpgid(child) == os.getpgid(0)  # same process group as the job
    assert sim.apps() == [] and sim.used(0) == 0


@pytest.mark.parametrize(("quirk", "expected"), [
    ("na", "0, GPU-sim-hostA-0, NVIDIA Simulated GPU, [N/A], 24576, [N/A]"),
    ("not_supported",
     "0, GPU-sim-hostA-0, NVIDIA Simulated GPU, [Not Supported], 24576, [Not Supported]"),
])
def test_value_quirks(sim: Sim, quirk: Any, expected: str) -> None:
    set_quirk(sim.state, quirk)
    assert sim.smi(*GPU_QUERY[1:]).splitlines()[0] == expected


def test_empty_and_failing_driver(sim: Sim) -> None:
    set_quirk(sim.state, "empty")
    for cmd in (GPU_QUERY, APPS_QUERY, [NVSMI, "-L"]):
        result = sim.run(cmd)
        assert (result.returncode, result.stdout) == (0, "")
    set_quirk(sim.state, "fail")
    failed = sim.run(GPU_QUERY)
    assert failed.returncode == 9
    assert failed.stdout.startswith(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    set_quirk(sim.state, None)
    assert sim.run(GPU_QUERY).returncode == 0
    with pytest.raises(ValueError):
        set_quirk(sim.state, "bogus")  # type: ignore[arg-type]


def test_missing_state_is_driver_failure(sim: Sim, tmp_path: Path) -> None:
    env = {k: v for k, v in sim.env.items() if k != "EQ_SIM_STATE"}
    for environment in (env, {**env, "EQ_SIM_STATE": str(tmp_path / "nowhere")}):
        result = subprocess.run(GPU_QUERY, env=environment, capture_output=True, text=True,
                                timeout=30)
        assert result.returncode == 9 and "NVIDIA-SMI has failed" in result.stdout


def test_runs_log_and_overlaps(sim: Sim) -> None:
    for job in ("a", "b"):
        assert sim.train(*FAST, EQ_JOB_ID=job).returncode == 0
    runs = read_runs(sim.state)
    assert [(e["event"], e["job"]) for e in runs] == [
        ("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]
    assert all(e["gpu"] == 0 and e["attempt"] == 1 for e in runs)
    assert find_overlaps(runs) == []
    first = sim.start("--epochs", "100", "--epoch-seconds", "0.05", EQ_JOB_ID="c")
    wait_until(lambda: sim.used(0) > 0)
    assert sim.train(*FAST, EQ_JOB_ID="d").returncode == 0
    assert sim.train(*FAST, EQ_JOB_ID="e", gpu="1").returncode == 0
    first.terminate()
    first.wait(timeout=10)
    overlaps = find_overlaps(read_runs(sim.state))
    assert [(a.job, b.job) for a, b in overlaps] == [("c", "d")]


def test_find_overlaps_linger_and_unmatched() -> None:
    def ev(kind: str, job: str, pid: int, t: float, **kw: Any) -> dict[str, Any]:
        return {"event": kind, "job": job, "attempt": 1, "pid": pid, "gpu": 0, "t": t, **kw}

    runs = [ev("start", "a", 1, 0.0), ev("end", "a", 1, 10.0, exit=0, linger_until=15.0),
            ev("start", "b", 2, 12.0), ev("end", "b", 2, 20.0, exit=0, linger_until=None)]
    assert find_overlaps(runs) == []
    assert [(a.job, b.job) for a, b in find_overlaps(runs, include_linger=True)] == [("a", "b")]
    crashed = [ev("start", "x", 3, 0.0), ev("start", "y", 4, 50.0)]
    assert len(find_overlaps(crashed)) == 1
    assert find_overlaps(crashed, unmatched_end=1.0) == []
    assert run_intervals(runs)[0].released == 15.0


def test_sim_bin_dir_has_executables() -> None:
    for name in ("nvidia-smi", "fake-train"):
        assert os.access(sim_bin_dir() / name, os.X_OK)


def test_the_shell_fast_path_answers_exactly_as_the_python_stand_in(tmp_path: Path) -> None:
    """nvidia-smi answers the probe's two queries in sh/awk; _nvidia_smi.py defines the
    behaviour. Same state, same answers: running, lingering and expired records on several
    GPUs, one process on two GPUs, a legacy record name, a base allocation, someone else's
    processes, every field the fast path knows."""
    state = tmp_path / "state"
    init_sim_state(state, host="fast", gpus=3, memory_mib=16000, base_mib=7)
    procs = state / "procs"
    procs.mkdir(exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        now = time.time()
        records = [
            {"pid": os.getpid(), "gpu": 2, "mib": 3000, "linger_until": None},
            {"pid": os.getpid(), "gpu": 0, "mib": 2900, "linger_until": None},
            {"pid": sleeper.pid, "gpu": 2, "mib": 500, "linger_until": None},
            {"pid": 3_999_001, "gpu": 0, "mib": 1200, "linger_until": now + 300},  # lingering
            {"pid": 3_999_002, "gpu": 1, "mib": 900, "linger_until": now - 5},  # released
            {"pid": 3_999_003, "gpu": 1, "mib": 800, "linger_until": None},  # gone
        ]
        for record in records:
            (procs / f"{record['pid']}-{record['gpu']}.json").write_text(
                json.dumps({**record, "peak_mib": 9000, "job": "j 1", "attempt": 1}))
        (procs / "3999004.json").write_text(json.dumps(  # the layout before one file per GPU
            {"pid": 3_999_004, "gpu": 1, "mib": 700, "linger_until": now + 300}))
        env = {**os.environ, "EQ_SIM_STATE": str(state)}
        # the fast path must answer by itself: a python3 that fails stands first on its PATH
        no_python = tmp_path / "no-python"
        no_python.mkdir()
        (no_python / "python3").write_text("#!/bin/sh\nexit 97\n")
        (no_python / "python3").chmod(0o755)
        fast_env = {**env, "PATH": f"{no_python}:{os.environ['PATH']}"}
        queries = ["--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu",
                   "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,"
                   "power.draw", "--query-gpu=memory.used,index", "--query-gpu=gpu_name, gpu_uuid",
                   "--query-compute-apps=pid,gpu_uuid,used_memory",
                   "--query-compute-apps=used_gpu_memory,process_name,gpu_name,pid"]
        # someone else's processes: none, then two on one GPU and one on another
        for foreign in ([], [{"gpu": 0, "mib": 1000}, {"gpu": 2, "mib": 4000},
                             {"gpu": 0, "mib": 250}]):
            set_foreign(state, foreign)
            for query in queries:
                args = [query, "--format=csv,noheader,nounits"]
                fast = subprocess.run(["sh", NVSMI, *args], env=fast_env,
                                      capture_output=True, text=True, check=True).stdout
                slow = subprocess.run([sys.executable, str(BIN / "_nvidia_smi.py"), *args],
                                      env=env, capture_output=True, text=True,
                                      check=True).stdout
                assert fast == slow, (query, foreign)
                assert fast.strip()
                assert ("4001000" in fast) == (bool(foreign) and "compute-apps" in query
                                               and "pid" in query)
    finally:
        sleeper.kill()
        sleeper.wait()
