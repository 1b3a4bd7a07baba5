"""The simulated GPUs for GPU sharing: memory that ramps up while a job trains (so two jobs
packed on one GPU really race), an OOM when a step does not fit, and jobs on several GPUs
holding memory on each (real subprocesses, polled through nvidia-smi and runs.jsonl)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.model import FailureClass
from eq_tui.engine.tick.classify import classify_failure
from eq_tui.sim.state import (
    find_overlaps,
    hold_memory,
    init_sim_state,
    read_runs,
    run_intervals,
    set_foreign,
)
from tests.integration.test_sim import BIN, Sim, wait_until

TOTAL = 24576
LONG = ["--epochs", "400", "--epoch-seconds", "0.05"]  # runs until the test ends it


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim(init_sim_state(tmp_path / "state", host="hostA", gpus=3, memory_mib=TOTAL))
    yield s
    s.cleanup()


def size_text(mib: float) -> str:
    """As PyTorch's allocator prints a size."""
    return f"{mib:.2f} MiB" if mib <= 1024 else f"{mib / 1024:.2f} GiB"


def events(sim: Sim, kind: str, pid: int | None = None) -> list[dict[str, Any]]:
    return [e for e in read_runs(sim.state)
            if e["event"] == kind and (pid is None or e["pid"] == pid)]


def mine(sim: Sim, pid: int) -> list[tuple[str, int]]:
    """(GPU uuid, MiB) of every row nvidia-smi lists for one process."""
    return [(uuid, mib) for p, uuid, mib in sim.apps() if p == pid]


def test_a_ramping_job_grows_in_steps_to_its_peak_while_it_trains(sim: Sim) -> None:
    proc = sim.start("--mem", "6000", "--ramp", "4", *LONG, EQ_JOB_ID="r")
    seen: list[int] = []

    def at_peak() -> bool:
        used = sim.used(0)
        assert used <= 6000 and proc.poll() is None
        if used:
            seen.append(used)
        return used == 6000

    wait_until(at_peak, timeout=30)
    assert seen == sorted(seen), "memory only grows"
    assert seen[0] < 6000 and len({m for m in seen if 512 < m < 6000}) >= 2, seen
    assert mine(sim, proc.pid) == [("GPU-sim-hostA-0", 6000)]
    start = events(sim, "start", proc.pid)
    assert [(e["mib"], e["peak_mib"], e["gpus"]) for e in start] == [(512, 6000, [0])]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    out = proc.stdout.read() if proc.stdout else ""
    assert "epoch 1/400" in out  # it trained while it grew
    assert sim.used(0) == 0 and events(sim, "oom") == []


def test_a_job_shorter_than_its_ramp_is_not_held_up_by_it(sim: Sim) -> None:
    result = sim.train("--mem", "20000", "--ramp", "60", "--epochs", "3", "--epoch-seconds",
                       "0.1", EQ_JOB_ID="short")
    assert result.returncode == 0, result.stderr
    assert "epoch 3/3" in result.stdout
    start, end = events(sim, "start")[0], events(sim, "end")[0]
    assert end["t"] - start["t"] < 60, "training waited for the ramp"
    assert sim.used(0) == 0


def test_mem_without_ramp_is_all_at_start(sim: Sim) -> None:
    proc = sim.start("--mem", "6000", *LONG)
    wait_until(lambda: events(sim, "start"))
    assert mine(sim, proc.pid) == [("GPU-sim-hostA-0", 6000)]
    assert events(sim, "start")[0]["mib"] == 6000


@pytest.mark.parametrize("linger", [0.0, 3.0])
def test_a_step_that_does_not_fit_is_a_cuda_oom_and_gives_the_memory_back(
        sim: Sim, linger: float) -> None:
    set_foreign(sim.state, [{"gpu": 1, "mib": 20000}])
    room = TOTAL - 20000
    result = sim.train("--mem", "8000", "--ramp", "1", *LONG, "--linger", str(linger),
                       gpu="1", EQ_JOB_ID="greedy")
    assert result.returncode == 1
    assert "epoch 1/400" in result.stdout  # it started and trained before it ran out
    [start] = events(sim, "start")
    [oom] = events(sim, "oom")
    [end] = events(sim, "end")
    assert start["pid"] == oom["pid"] == end["pid"] and end["exit"] == 1
    assert (oom["during"], oom["gpu"], oom["oom_gpu"], oom["gpus"]) == ("ramp", 1, 1, [1])
    held, asked, free = oom["held_mib"], oom["asked_mib"], oom["free_mib"]
    assert 512 <= held <= room and held + free == room and asked > free
    assert start["t"] < oom["t"] <= end["t"]
    text = result.stderr
    assert text.rstrip().splitlines()[-1].startswith(
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size_text(asked)}. "
        f"GPU 0 has a total capacity of 24.00 GiB of which {size_text(free)} is free. "
        f"Including non-PyTorch memory, this process has {size_text(held)} memory in use.")
    assert "in train_step" in text
    assert classify_failure(1, result.stdout + text).cls is FailureClass.CUDA_OOM
    if linger:
        assert end["linger_until"] is not None
        assert sim.used(1) in (20000 + held, 20000)  # lingers unless 3 s went by already
        wait_until(lambda: sim.used(1) == 20000)
    else:
        assert end["linger_until"] is None and sim.used(1) == 20000
    assert [pid for pid, _, _ in sim.apps()] == [4_000_001]  # the foreign process only
    assert list((sim.state / "procs").glob(f"{start['pid']}-*.json")) == []


def test_two_jobs_packed_on_one_gpu_both_start_and_the_one_that_outgrows_it_ooms(
        tmp_path: Path) -> None:
    sim = Sim(init_sim_state(tmp_path / "state", host="hostA", gpus=1, memory_mib=TOTAL))
    try:
        job = ["--mem", "14000", "--ramp", "5", "--epochs", "16", "--epoch-seconds", "0.5"]
        first = sim.start(*job, EQ_JOB_ID="first")
        # the second starts about 1 s into the first one's ramp
        wait_until(lambda: sim.used(0) >= 512 + (14000 - 512) // 5, timeout=30)
        second = sim.start(*job, EQ_JOB_ID="second")
        peaks: list[int] = []

        def one_at_peak() -> bool:
            used = sim.used(0)
            assert used <= TOTAL
            peaks.extend(mib for _, _, mib in sim.apps())
            return 14000 in peaks

        wait_until(one_at_peak, timeout=60)
        codes = {proc.pid: proc.wait(timeout=60) for proc in (first, second)}
    finally:
        sim.cleanup()
    assert sorted(codes.values()) == [0, 1]
    starts = events(sim, "start")
    [oom] = events(sim, "oom")
    assert {e["job"] for e in starts} == {"first", "second"}
    assert max(e["t"] for e in starts) < oom["t"], "both started before either ran out"
    assert codes[oom["pid"]] == 1 and oom["during"] == "ramp"
    other = TOTAL - oom["held_mib"] - oom["free_mib"]  # what the survivor held right then
    assert 512 < other <= 14000 and oom["asked_mib"] > oom["free_mib"]
    assert {e["job"]: e["exit"] for e in events(sim, "end")} == {
        e["job"]: codes[e["pid"]] for e in starts}
    assert len(find_overlaps(read_runs(sim.state))) == 1  # packed: the two did overlap
    assert sim.used(0) == 0


def test_a_job_on_several_gpus_holds_its_memory_on_each(sim: Sim) -> None:
    proc = sim.start("--mem", "3000", "--ramp", "1", *LONG, gpu="2,0", EQ_JOB_ID="wide")
    wait_until(lambda: mine(sim, proc.pid) == [("GPU-sim-hostA-0", 3000),
                                                ("GPU-sim-hostA-2", 3000)], timeout=30)
    assert [sim.used(g) for g in range(3)] == [3000, 0, 3000]
    assert [int(row[5]) >= 90 for row in sim.gpus()] == [True, False, True]
    apps_query = ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"]
    slow = sim.run([sys.executable, str(BIN / "_nvidia_smi.py"), *apps_query]).stdout
    assert slow == sim.smi(*apps_query) == (f"{proc.pid}, GPU-sim-hostA-0, 3000\n"
                                            f"{proc.pid}, GPU-sim-hostA-2, 3000\n")
    [start] = events(sim, "start")
    assert (start["gpu"], start["gpus"]) == (2, [2, 0])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    out = proc.stdout.read() if proc.stdout else ""
    assert "cuda:0 (NVIDIA Simulated GPU, 24576 MiB) [sim GPU 2]" in out
    assert "cuda:1 (NVIDIA Simulated GPU, 24576 MiB) [sim GPU 0]" in out
    assert sim.apps() == [] and [sim.used(g) for g in range(3)] == [0, 0, 0]
    assert [(i.gpu, i.exit) for i in run_intervals(read_runs(sim.state))] == [
        (0, 128 + signal.SIGTERM), (2, 128 + signal.SIGTERM)]


def test_visible_devices_are_parsed_as_cuda_does(sim: Sim) -> None:
    """Up to the first entry that is not a GPU of this host, or one named again."""
    for visible, gpus in [("1,7,0", [1]), ("GPU-sim-hostA-2,1", [2, 1]), ("0,0,1", [0])]:
        assert sim.train("--epochs", "0", "--mem", "100", gpu=visible).returncode == 0
        assert read_runs(sim.state)[-1]["gpus"] == gpus, visible


def test_a_wide_job_that_does_not_fit_on_one_of_its_gpus_holds_nothing(sim: Sim) -> None:
    set_foreign(sim.state, [{"gpu": 1, "mib": 23000}])
    result = sim.train("--mem", "2048", "--epochs", "1", gpu="0,1")
    assert result.returncode == 1
    assert ("Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 24.00 GiB of which "
            "1.54 GiB is free") in result.stderr
    [oom] = events(sim, "oom")
    assert (oom["during"], oom["oom_gpu"], oom["gpus"], oom["free_mib"]) == (
        "start", 1, [0, 1], TOTAL - 23000)
    assert events(sim, "start") == [] and [sim.used(g) for g in range(2)] == [0, 23000]


def test_sigterm_mid_ramp_releases_the_memory_on_every_gpu(sim: Sim) -> None:
    proc = sim.start("--mem", "20000", "--ramp", "30", *LONG, gpu="0,1")
    wait_until(lambda: all(512 < sim.used(g) < 20000 for g in (0, 1)), timeout=30)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert sim.apps() == [] and [sim.used(g) for g in range(3)] == [0, 0, 0]
    assert list((sim.state / "procs").glob("*.json")) == []
    assert [e["exit"] for e in events(sim, "end")] == [128 + signal.SIGTERM]
    assert events(sim, "oom") == []


def test_a_hung_wide_job_computes_nothing_on_any_of_its_gpus(sim: Sim) -> None:
    proc = sim.start("--mem", "1000", "--hang-after", "0", gpu="0,1")
    wait_until(lambda: events(sim, "hang"))
    assert [row[3:] for row in sim.gpus()] == [["1000", "24576", "0"], ["1000", "24576", "0"],
                                                ["0", "24576", "0"]]
    proc.kill()


def test_a_leaked_child_of_a_wide_job_holds_memory_on_each_gpu(sim: Sim) -> None:
    result = sim.train("--epochs", "1", "--epoch-seconds", "0.05", "--mem", "2000",
                       "--leak-child", "700", gpu="1,2")
    assert result.returncode == 0, result.stderr
    child = int(result.stdout.split("worker pid=", 1)[1].split()[0])
    sim.extra_pids.append(child)
    assert sim.apps() == [(child, "GPU-sim-hostA-1", 700), (child, "GPU-sim-hostA-2", 700)]


def test_hold_memory_on_two_gpus_keeps_both(sim: Sim) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(sim.state, sleeper.pid, 0, 100)
        hold_memory(sim.state, sleeper.pid, 2, 200)
        assert sim.apps() == [(sleeper.pid, "GPU-sim-hostA-0", 100),
                              (sleeper.pid, "GPU-sim-hostA-2", 200)]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_negative_ramp_is_a_usage_error(sim: Sim) -> None:
    result = sim.train("--ramp", "-1")
    assert result.returncode == 2 and "--ramp" in result.stderr


def test_a_ramp_whose_end_passed_between_two_steps_finishes_growing(sim: Sim) -> None:
    """A process held up past its ramp's end between a step and the next (a loaded box) takes
    the last step at once: found by bench/packing.py as `ValueError: sleep length must be
    non-negative`."""
    import importlib.machinery
    import importlib.util
    import time
    from types import SimpleNamespace

    loader = importlib.machinery.SourceFileLoader("fake_train", str(BIN / "fake-train"))
    spec = importlib.util.spec_from_loader("fake_train", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BIN))
    try:
        loader.exec_module(module)
        config = {"host": "hostA", "gpus": 1, "memory_mib": 24576, "base_mib": 0,
                  "foreign": [], "linger_s": 0.0}
        memory = module.GpuMemory(sim.state, config, [0], {}, peak=6000, ramp_s=1.0,
                                  linger=0.0, guard=module.SignalGuard())
        memory.hold(512)
        since = memory.since = 100.0
        # pause's deadline, a step just before the ramp's end, then a wake-up after it
        ticks = iter([since + 0.5, since + 0.99, since + 1.5])
        module.time = SimpleNamespace(monotonic=lambda: next(ticks, since + 20.0),
                                      sleep=time.sleep, time=time.time)
        memory.pause(10.0)
        assert memory.held == 6000
        memory.release()
    finally:
        sys.path.remove(str(BIN))
