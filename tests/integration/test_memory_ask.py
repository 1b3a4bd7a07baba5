"""What the UI and `status --jobs` say a job's next attempt asks after a CUDA OOM on a shared GPU
is what the scheduler asks: one rule (MemoryBook.need), computed by the engine and published in
the job's record (issue 43: for `mem_mib: auto` the UI multiplied the last estimate by its own
copy of 1.5, while the scheduler asks 1.5x the estimate learned from the family's peak, which
may have grown since). Real screen sessions with a simulated GPU; who ran out of memory is read
from the host's records."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest

from eq_tui.engine.tick.memory import ESCALATION, learned_estimate
from eq_tui.manifest.model import HostSpec, OomRetry, SimulateSpec
from eq_tui.present.memory_ask import gib
from eq_tui.tui.memory_text import escalation_detail, escalation_text
from tests.support.engine_run import job, make_manifest, start_engine

pytestmark = pytest.mark.integration
GPU_MIB = 24576


def train(mem: int, seconds: float, after: float = 0.0) -> str:
    command = f"fake-train --epochs 4 --epoch-seconds {seconds / 4} --mem {mem}"
    return f"sh -c {shlex.quote(f'sleep {after} && {command}')}" if after else command


async def test_the_ask_shown_after_an_auto_oom_is_the_one_the_scheduler_places_by(
        tmp_path: Path) -> None:
    # j0 runs alone and shows 5000 MiB: the family packs at 6774 each. Then `greedy` (says
    # 4000, takes 16000), j3 (takes 7000, a second in) and j1 (takes 5000, two seconds in) share
    # the GPU: j1 runs out of memory. j3 ends while `greedy` still runs: its 7000 is the
    # family's peak now, and the scheduler asks 1.5x the estimate learned from it for j1's next
    # attempt, not 1.5x the 6774 j1 was placed for (which the UI used to say).
    jobs = [job("j0", train(5000, 1.0), mem_mib="auto", family="main", priority=9),
            job("greedy", train(16000, 10.0), mem_mib=4000, family="other", priority=5),
            job("j3", train(7000, 2.0, after=1.0), mem_mib="auto", family="main", priority=4),
            job("j1", train(5000, 2.0, after=2.0), mem_mib="auto", family="main", priority=3)]
    hosts = (HostSpec(name="sim", max_parallel=16,
                      simulate=SimulateSpec(gpus=1, memory_mib=GPU_MIB)),)
    manifest = make_manifest(tmp_path, jobs, hosts=hosts,
                             oom_retry=OomRetry(delay=0.5, max_attempts=3))
    run = await start_engine(manifest, tmp_path / "run")
    grown = math_ceil(learned_estimate(7000) * ESCALATION)
    try:
        await run.wait_for(lambda: run.engine.jobs["j1"].mem_escalation == 1, timeout=60)
        await run.wait_for(lambda: run.engine.jobs["j1"].next_ask_mib == grown, timeout=30)
        record = run.engine.jobs["j1"].to_json()
        shown = gib(grown)
        assert escalation_text(record) == f"oom (shared) → {shown}"
        assert escalation_detail(record).startswith(f"next attempt asks {shown}")
        run.engine.persistence.persist()
        # `eq-tui status --jobs` as a person runs it, while j1 waits for its next attempt
        status = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "eq_tui", "status", str(tmp_path / "run"), "--jobs",
            stdout=asyncio.subprocess.PIPE)
        out, _ = await status.communicate()
        line = next(x for x in out.decode().splitlines() if x.startswith("j1 "))
        assert f"next attempt asks {shown}" in line, line
        assert run.engine.jobs["j1"].attempts == 1  # it still waited when status read it
        await run.wait_for(lambda: run.engine.finished, timeout=90)
    finally:
        await run.stop()
    (oom,) = [e for e in run.runs() if e["event"] == "oom"]
    assert oom["job"] == "j1"
    first, second = run.job("j1")["history"]
    assert first["estimate_mib"] == learned_estimate(5000)
    # what the scheduler placed the next attempt by is what was shown
    assert second["estimate_mib"] == grown != math_ceil(first["estimate_mib"] * ESCALATION)


def math_ceil(value: float) -> int:
    return -int(-value // 1)
