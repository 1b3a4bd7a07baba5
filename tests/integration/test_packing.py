"""GPU sharing by memory on real screen sessions with simulated GPUs. What ran where and when is
read from the jobs' own start/end/oom records on the host (runs.jsonl), not the engine's state."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest.model import HostSpec, SimulateSpec
from eq_tui.sim.state import init_sim_state, run_intervals
from tests.support.engine_run import EngineRun, job, make_manifest, run_to_end, start_engine
from tests.support.ground_truth import most_overlapping

pytestmark = pytest.mark.integration
GPU_MIB = 24576


def one_gpu(gpus: int = 1, **kwargs: Any) -> tuple[HostSpec, ...]:
    return (HostSpec(name="sim", max_parallel=16,
                     simulate=SimulateSpec(gpus=gpus, memory_mib=GPU_MIB), **kwargs),)


def train(mem: int, seconds: float = 2.0) -> str:
    return f"fake-train --epochs 4 --epoch-seconds {seconds / 4} --mem {mem}"


def most_at_once(run: EngineRun, gpu: int = 0) -> int:
    """The most attempts that held GPU `gpu` at the same moment, from the host's records."""
    return most_overlapping((i.start, i.end) for i in run_intervals(run.runs()) if i.gpu == gpu)


def ooms(run: EngineRun) -> list[dict[str, Any]]:
    return [event for event in run.runs() if event["event"] == "oom"]


async def test_jobs_share_a_gpu_as_far_as_their_memory_fits(tmp_path: Path) -> None:
    # 4 x 5000 + 1024 margin fits 24 GiB; a fifth would not. The crash guard is on (the
    # default): a healthy sweep launches as without it.
    jobs = [job(f"j{i}", train(5000, 5.0), mem_mib=5000) for i in range(5)]
    manifest = make_manifest(tmp_path, jobs, hosts=one_gpu())
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    assert most_at_once(run) == 4
    assert ooms(run) == []
    history = [run.job(f"j{i}")["history"][-1] for i in range(5)]
    assert all(a["shared"] and a["estimate_mib"] == 5000 for a in history)
    # what each job's processes held was measured from the probes: its --mem
    assert {a["peak_mib"] for a in history} == {5000}


async def test_a_job_that_has_not_allocated_yet_still_holds_its_estimate(tmp_path: Path) -> None:
    late = shlex.quote(f"sleep 3 && {train(12000, 1.0)}")
    jobs = [job("late", f"sh -c {late}", mem_mib=12000),
            job("next", train(12000, 1.0), mem_mib=12000)]
    run = await start_engine(make_manifest(tmp_path, jobs, hosts=one_gpu()), tmp_path / "run")
    try:
        await run.wait_for(lambda: run.status("late") == "running")
        ticks = run.engine.pacing.full_ticks
        # the engine has decided again since: `next` was looked at and did not fit beside
        # `late`, which reads 0 MiB on the GPU (it has not allocated: no start record)
        await run.wait_for(lambda: run.engine.pacing.full_ticks >= ticks + 2
                           and "needs 11.7" in (run.engine.jobs["next"].reason or ""))
        assert [e for e in run.runs() if e["event"] == "start"] == []
        assert run.status("next") == "pending"
        assert run.engine.jobs["next"].reason == "sim GPU 0 has 11.3 GiB free of 24; needs 11.7"
        await run.wait_for(lambda: run.engine.finished, timeout=60)
    finally:
        await run.stop()
    late_run, next_run = sorted(run_intervals(run.runs()), key=lambda i: i.start)
    assert (late_run.job, next_run.job) == ("late", "next")
    assert next_run.start >= late_run.end
    assert ooms(run) == []


async def test_someone_elses_memory_is_subtracted_not_ignored(tmp_path: Path) -> None:
    init_sim_state(sim_state_dir(tmp_path / "run", "sim"), host="sim", gpus=1,
                   memory_mib=GPU_MIB, foreign=[{"gpu": 0, "mib": 10000}])
    # 10000 someone else's + 2 x 6000 + 1024 fits; a third does not. One job per GPU would
    # not use this GPU at all (10000 MiB is far above the free threshold)
    jobs = [job(f"j{i}", train(6000), mem_mib=6000) for i in range(3)]
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=one_gpu()),
                                 tmp_path / "run")
    assert code == 0
    assert most_at_once(run) == 2
    assert ooms(run) == []


async def test_a_shared_oom_is_retried_elsewhere_at_once_with_half_again(tmp_path: Path) -> None:
    # the jobs say 4000 but take 9000: the third to allocate on GPU 0 runs out of memory. They
    # run 10 s, so "at once" (the retry starts while the two on GPU 0 still run) holds on a
    # loaded box too
    jobs = [job(f"j{i}", train(9000, 10.0), mem_mib=4000) for i in range(3)]
    manifest = make_manifest(tmp_path, jobs, hosts=one_gpu(gpus=2))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    (oom,) = ooms(run)
    victim = run.job(oom["job"])
    assert victim["mem_escalation"] == 1
    first, second = victim["history"]
    assert first["failure_class"] == "cuda_oom" and first["gpus"] == [0]
    assert second["estimate_mib"] == 6000 and second["gpus"] == [1]
    # retried at once, while the two that crowded it out were still running on GPU 0
    others = [i for i in run_intervals(run.runs()) if i.job != oom["job"]]
    retry = next(i for i in run_intervals(run.runs()) if i.job == oom["job"])
    assert retry.gpu == 1 and retry.start < min(i.end for i in others)


async def test_auto_runs_the_first_of_a_family_alone_then_packs_on_what_it_showed(
        tmp_path: Path) -> None:
    jobs = [job(f"j{i}", train(5000, 1.0), mem_mib="auto", family="main") for i in range(4)]
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=one_gpu()),
                                 tmp_path / "run")
    assert code == 0
    intervals = sorted(run_intervals(run.runs()), key=lambda i: i.start)
    first, rest = intervals[0], intervals[1:]
    assert all(i.start >= first.end for i in rest)  # it ran alone, and was measured
    assert run.job(first.job)["history"][-1]["peak_mib"] == 5000
    # then 5000 x 1.15 + 1024 = 6774 each: three fit beside each other in 24 GiB
    assert {run.job(i.job)["history"][-1]["estimate_mib"] for i in rest} == {6774}
    assert most_at_once(run) == 3
    assert ooms(run) == []


async def test_cpu_only_jobs_run_beside_a_full_gpu_queue_without_a_gpu(tmp_path: Path) -> None:
    marker = tmp_path / "cvd"
    marker.mkdir()
    cpu_cmd = shlex.quote(f'echo "[$CUDA_VISIBLE_DEVICES]" > {marker}/$EQ_JOB_ID; sleep 1')
    jobs = [job(f"g{i}", train(20000, 2.0)) for i in range(3)]
    jobs += [job(f"c{i}", f"sh -c {cpu_cmd}", gpus_per_job=0) for i in range(3)]
    manifest = make_manifest(tmp_path, jobs, hosts=one_gpu(max_cpu_jobs=2))
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: sum(run.status(f"c{i}") == "running" for i in range(3)) == 2)
        # the GPU queue has barely started: the CPU jobs did not wait behind it
        assert run.status("g2") == "pending"
        await run.wait_for(lambda: run.engine.finished, timeout=60)
    finally:
        await run.stop()
    assert {p.read_text().strip() for p in marker.iterdir()} == {"[]"}
    cpu_runs = [run.job(f"c{i}")["history"][-1] for i in range(3)]
    assert all(a["gpus"] == [] for a in cpu_runs)
    starts = sorted(a["start"] for a in cpu_runs)
    ends = sorted(a["end"] for a in cpu_runs)
    assert starts[2] >= ends[0]  # never three at once: max_cpu_jobs 2


async def test_a_shared_oom_retry_goes_back_onto_its_card_where_it_fits_now(
        tmp_path: Path) -> None:
    """One card, shared: after the retry delay the job that ran out goes back beside the two
    that are still running (1.5 x 3000 fits beside their measured 2 x 9000), not after them."""
    jobs = [job(f"big{i}", train(9000, 8.0), mem_mib=9000) for i in range(2)]
    jobs.append(job("small", f"{train(3000, 1.0)} --oom-attempts 1", mem_mib=3000))
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=one_gpu()),
                                 tmp_path / "run")
    assert code == 0
    (oom,) = ooms(run)
    assert oom["job"] == "small" and oom["attempt"] == 1
    retry = next(i for i in run_intervals(run.runs()) if i.job == "small")
    bigs = [i for i in run_intervals(run.runs()) if i.job.startswith("big")]
    assert retry.attempt == 2 and retry.gpu == 0
    assert retry.start < min(i.end for i in bigs)  # beside them, not after them
    assert run.job("small")["history"][-1]["estimate_mib"] == 4500


async def test_the_last_attempt_after_ooms_gets_its_card_alone_before_new_jobs(
        tmp_path: Path) -> None:
    """Its third attempt waits for the card alone, and jobs added meanwhile (room for each
    beside the three running) are not packed onto that card: it is not starved by them. The
    first three run long enough that x's two CUDA OOMs and their retries, however loaded the
    machine, come while they still hold the card."""
    jobs = [job(f"first{i}", train(4000, 10.0), mem_mib=4000) for i in range(3)]
    jobs.append(job("x", f"{train(4000, 1.0)} --oom-attempts 2", mem_mib=4000))
    run = await start_engine(make_manifest(tmp_path, jobs, hosts=one_gpu()), tmp_path / "run")
    try:
        await run.wait_for(lambda: "alone" in (run.engine.jobs["x"].reason or ""), timeout=30)
        assert run.engine.jobs["x"].reason == (
            "waits for sim GPU 0 alone (attempt 3 after CUDA OOMs on a shared GPU); "
            "nothing new is packed onto it")
        for i in range(3):
            added = await run.engine.command("add", [], {"id": f"later{i}",
                                                         "cmd": train(4000, 1.0),
                                                         "mem_mib": 4000})
            assert added["ok"], added
        await run.wait_for(lambda: run.engine.finished, timeout=60)
    finally:
        await run.stop()
    intervals = run_intervals(run.runs())
    x = next(i for i in intervals if i.job == "x")
    assert x.attempt == 3
    first = [i for i in intervals if i.job.startswith("first")]
    later = [i for i in intervals if i.job.startswith("later")]
    assert len(later) == 3
    assert x.start >= max(i.end for i in first)  # alone
    assert all(i.start >= x.end for i in later)  # and before the jobs added while it waited
