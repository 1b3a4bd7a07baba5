"""A CUDA OOM asking more than the card holds, on real screen sessions with simulated GPUs: never
retried on a card that size. How many times the job started, and where, is read from the
host's own records (runs.jsonl), not the engine's state."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.manifest.model import HostSpec, SimulateSpec
from eq_tui.sim.state import run_intervals
from tests.support.engine_run import EngineRun, job, make_manifest, run_to_end

pytestmark = pytest.mark.integration
# loads (2000 MiB), then its first step asks 200 GiB
HUGE = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 2000 --alloc 204800"


def sim(name: str, gpus: int, memory_mib: int) -> HostSpec:
    return HostSpec(name=name, simulate=SimulateSpec(gpus=gpus, memory_mib=memory_mib))


def starts(run: EngineRun, host: str, job_id: str) -> list[int | None]:
    """The exit code of each start of `job_id` on `host`, from the host's records."""
    return [interval.exit for interval in run_intervals(run.runs(host))
            if interval.job == job_id]


async def test_an_ask_no_gpu_of_the_run_holds_is_stuck_after_one_attempt(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("huge", HUGE)], hosts=(sim("sim", 2, 24576),))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    record = run.job("huge")
    assert record["status"] == "stuck" and record["failure"]["class"] == "cuda_oom"
    assert record["failure"]["detail"] == "asked 200.0 GiB; the largest GPU has 24.0 GiB"
    assert record["reason"] == "asked 200.0 GiB; the largest GPU has 24.0 GiB"
    assert starts(run, "sim", "huge") == [1]
    assert record["attempts"] == 1


async def test_the_retry_goes_to_the_host_whose_gpus_are_larger_than_the_ask(
        tmp_path: Path) -> None:
    # the small host has more free GPUs: the first attempt goes there
    hosts = (sim("small", 2, 24576), sim("large", 1, 262144))
    manifest = make_manifest(tmp_path, [job("huge", HUGE)], hosts=hosts)
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0, run.job("huge")
    assert starts(run, "small", "huge") == [1]
    assert starts(run, "large", "huge") == [0]
    record = run.job("huge")
    assert [a["host"] for a in record["history"]] == ["small", "large"]
    assert record["min_gpu_mib"] == 204800
