"""Placement by memory, as a pure decision: jobs + host views + what running jobs hold."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.decide.packing import MemoryPlacer
from eq_tui.engine.decide.scheduler import Decision, GpuView, HostView, decide
from eq_tui.engine.tick.memory import (
    LEVEL_AFTER_S,
    LEVEL_LOW_S,
    LEVEL_UNKNOWN_S,
    MemoryPlan,
    Usage,
    any_without_gpu,
    learned_estimate,
    others_by_gpu,
    usage_by_group,
)
from eq_tui.hosts.base import GpuProcess, GpuReading, HostSnapshot
from eq_tui.manifest.model import JobSpec, Manifest

GIB = 1024
NOW = 1000.0


def spec(id: str, mem: int | Literal["auto"] | None = 18 * GIB, **kwargs: Any) -> JobSpec:
    return JobSpec(id=id, phase="main", cmd="train", mem_mib=mem, family="main", **kwargs)


def manifest(*specs: JobSpec, **kwargs: Any) -> Manifest:
    return replace(Manifest(project="p", source="m.yaml", jobs=specs), **kwargs)


def host(name: str = "h", used: tuple[int, ...] = (0,), total: int = 80 * GIB,
         others: tuple[int, ...] | None = None, **kwargs: Any) -> HostView:
    """`others`: what processes not of our jobs hold on each GPU (default: all it uses)."""
    foreign = used if others is None else others
    gpus = tuple(GpuView(i, u, total, o)
                 for i, (u, o) in enumerate(zip(used, foreign, strict=True)))
    defaults: dict[str, Any] = {"usable": True, "allowed": None, "max_parallel": 64}
    defaults.update(kwargs)
    return HostView(name=name, gpus=gpus, **defaults)


def running(job_id: str, host_name: str, gpus: list[int], estimate: int | None,
            **attempt: Any) -> JobState:
    job = JobState(id=job_id, phase="main", cmd="train", status=JobStatus.RUNNING)
    job.history.append(Attempt(n=1, host=host_name, gpus=gpus, session="s", attempt_dir="d",
                               log="l", estimate_mib=estimate, shared=estimate is not None,
                               **attempt))
    return job


def run(m: Manifest, jobs: list[JobState], hosts: list[HostView], *,
        usage: dict[str, Usage] | None = None,
        family_peak: dict[str, int] | None = None) -> Decision:
    plan = MemoryPlan(m.job_specs, usage or {}, family_peak or {}, NOW,
                      cpu_jobs=any_without_gpu(m.job_specs.values()))
    return decide(m, jobs, hosts, now=NOW, paused=False, preconditions={}, memory=plan)


def waiting(*ids: str) -> list[JobState]:
    return [JobState(id=i, phase="main", cmd="train") for i in ids]


def placed(d: Decision) -> list[tuple[str, str, tuple[int, ...], int | None]]:
    return [(x.job_id, x.host, x.gpus, x.mem_mib) for x in d.launches]


def test_four_18_gib_jobs_share_an_80_gib_gpu_and_the_fifth_waits_with_its_reason() -> None:
    m = manifest(*(spec(f"j{i}") for i in range(5)))
    d = run(m, waiting(*(f"j{i}" for i in range(5))), [host()])
    assert placed(d) == [(f"j{i}", "h", (0,), 18 * GIB) for i in range(4)]
    # 80 GiB - 4 x 18 - 1 GiB margin = 7 GiB left
    assert d.waiting["j4"] == "h GPU 0 has 7.0 GiB free of 80; needs 18.0"


def test_a_job_that_has_not_allocated_yet_still_holds_its_estimate() -> None:
    m = manifest(spec("a", 40 * GIB), spec("b", 40 * GIB))
    a = running("a", "h", [0], 40 * GIB)
    # the GPU reads empty: a has not touched CUDA yet, and still holds its 40 GiB
    d = run(m, [a, *waiting("b")], [host(used=(0,))], usage={"a": Usage(1, grew_at=NOW)})
    assert d.launches == []
    assert d.waiting["b"] == "h GPU 0 has 39.0 GiB free of 80; needs 40.0"


def test_a_job_that_uses_more_than_its_estimate_holds_what_it_uses() -> None:
    m = manifest(spec("a", 10 * GIB), spec("b", 30 * GIB))
    a = running("a", "h", [0], 10 * GIB)
    usage = {"a": Usage(1, now={0: 60 * GIB}, peak=60 * GIB, grew_at=NOW)}
    d = run(m, [a, *waiting("b")], [host(used=(60 * GIB,), others=(0,))], usage=usage)
    assert d.launches == []  # 80 - 60 - 1 = 19 GiB left


def test_once_levelled_off_a_job_holds_what_it_showed_not_its_estimate() -> None:
    m = manifest(spec("a", 40 * GIB), spec("b", 40 * GIB))
    a = running("a", "h", [0], 40 * GIB)
    settling = {"a": Usage(1, now={0: 20 * GIB}, peak=20 * GIB, grew_at=NOW - 1)}
    view = host(used=(20 * GIB,), others=(0,))
    assert run(m, [a, *waiting("b")], [view], usage=settling).launches == []
    levelled = {"a": Usage(1, now={0: 20 * GIB}, peak=20 * GIB,
                           grew_at=NOW - LEVEL_LOW_S)}
    d = run(m, [a, *waiting("b")], [view], usage=levelled)
    assert placed(d) == [("b", "h", (0,), 40 * GIB)]


def test_someone_elses_memory_is_subtracted_not_a_reason_to_skip_the_gpu() -> None:
    m = manifest(spec("a", 30 * GIB), spec("b", 30 * GIB))
    d = run(m, waiting("a", "b"), [host(used=(30 * GIB,))])
    assert placed(d) == [("a", "h", (0,), 30 * GIB)]  # 80 - 30 others - 1 margin = 49
    assert d.waiting["b"] == "h GPU 0 has 19.0 GiB free of 80; needs 30.0"


def test_best_fit_fills_a_shared_gpu_before_an_empty_one() -> None:
    m = manifest(spec("a", 20 * GIB), spec("b", 20 * GIB))
    a = running("a", "h", [1], 20 * GIB)
    d = run(m, [a, *waiting("b")], [host(used=(0, 0))])
    assert placed(d) == [("b", "h", (1,), 20 * GIB)]


def test_a_job_without_mem_mib_takes_an_empty_gpu_alone_and_nobody_joins_it() -> None:
    m = manifest(spec("alone", None), spec("small", 4 * GIB))
    d = run(m, waiting("alone", "small"), [host(used=(0, 0))])
    assert placed(d) == [("alone", "h", (0,), None), ("small", "h", (1,), 4 * GIB)]
    alone = running("alone", "h", [0], None)
    d = run(m, [alone, *waiting("small")], [host(used=(0, 0))])
    assert placed(d) == [("small", "h", (1,), 4 * GIB)]


def test_an_exclusive_job_never_joins_a_shared_gpu() -> None:
    m = manifest(spec("a", 4 * GIB), spec("x", 4 * GIB, exclusive=True))
    a = running("a", "h", [0], 4 * GIB)
    d = run(m, [a, *waiting("x")], [host(used=(0,))])
    assert d.launches == []
    assert "to itself" in d.waiting["x"]


def test_max_jobs_per_gpu_caps_sharing() -> None:
    m = manifest(*(spec(f"j{i}", 1 * GIB) for i in range(4)))
    d = run(m, waiting("j0", "j1", "j2", "j3"), [host(max_jobs_per_gpu=3)])
    assert [x.job_id for x in d.launches] == ["j0", "j1", "j2"]


def test_max_parallel_still_caps_the_jobs_of_a_host() -> None:
    m = manifest(*(spec(f"j{i}", 1 * GIB) for i in range(4)))
    d = run(m, waiting("j0", "j1", "j2", "j3"), [host(max_parallel=2)])
    assert [x.job_id for x in d.launches] == ["j0", "j1"]


def test_a_multi_gpu_job_gets_gpus_with_room_on_one_host() -> None:
    m = manifest(spec("big", 30 * GIB, gpus_per_job=2))
    small = host("small", used=(70 * GIB, 0))
    wide = host("wide", used=(0, 60 * GIB, 0))
    d = run(m, waiting("big"), [small, wide])
    assert placed(d) == [("big", "wide", (0, 2), 30 * GIB)]


def test_a_shared_oom_asks_for_half_again_then_for_its_gpu_alone() -> None:
    m = manifest(spec("j", 10 * GIB))
    first = waiting("j")[0]
    first.mem_escalation = 1
    assert placed(run(m, [first], [host()])) == [("j", "h", (0,), 15 * GIB)]
    first.mem_escalation = 2
    assert placed(run(m, [first], [host()])) == [("j", "h", (0,), None)]


def test_after_a_shared_oom_another_gpu_comes_first_and_the_crowded_one_where_it_fits() -> None:
    m = manifest(spec("j", 10 * GIB), spec("other", 10 * GIB))
    other = running("other", "h", [0], 10 * GIB)
    job = JobState(id="j", phase="main", cmd="train", status=JobStatus.FAILED_OOM,
                   retry_at=NOW, mem_escalation=1)
    job.history.append(Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d", log="l",
                               estimate_mib=10 * GIB, shared=True,
                               failure_class=FailureClass.CUDA_OOM))
    d = run(m, [other, job], [host(used=(10 * GIB, 0), others=(0, 0))])
    assert placed(d) == [("j", "h", (1,), 15 * GIB)]
    # with only the crowded GPU, it goes back beside what is there when 1.5x fits now (a
    # single shared card would otherwise wait for every other job to end)
    d = run(m, [other, job], [host(used=(10 * GIB,), others=(0,))])
    assert placed(d) == [("j", "h", (0,), 15 * GIB)]
    # and waits, saying how much is free, when it does not
    d = run(m, [other, job], [host(used=(10 * GIB,), others=(0,), total=24 * GIB)])
    assert d.launches == [] and "needs 15.0" in d.waiting["j"]


def test_auto_runs_alone_until_its_family_is_measured_then_packs() -> None:
    m = manifest(*(spec(f"j{i}", "auto") for i in range(3)))
    d = run(m, waiting("j0", "j1", "j2"), [host(used=(0, 0))])
    assert placed(d) == [("j0", "h", (0,), None), ("j1", "h", (1,), None)]
    d = run(m, waiting("j1", "j2"), [host(used=(0, 0))], family_peak={"main": 18 * GIB})
    estimate = learned_estimate(18 * GIB)
    assert estimate == round(18 * GIB * 1.15 + 1024)
    assert placed(d) == [("j1", "h", (0,), estimate), ("j2", "h", (0,), estimate)]


def test_the_measured_first_of_a_family_shares_its_gpu_once_levelled() -> None:
    m = manifest(*(spec(f"j{i}", "auto") for i in range(2)))
    pioneer = running("j0", "h", [0], None)
    levelled = {"j0": Usage(1, now={0: 18 * GIB}, peak=18 * GIB,
                            grew_at=NOW - LEVEL_UNKNOWN_S)}
    d = run(m, [pioneer, *waiting("j1")], [host(used=(18 * GIB,), others=(0,))], usage=levelled,
            family_peak={"main": 18 * GIB})
    assert placed(d) == [("j1", "h", (0,), learned_estimate(18 * GIB))]


def test_cpu_jobs_never_wait_behind_gpu_jobs_and_keep_to_max_cpu_jobs() -> None:
    gpu_jobs = [spec(f"g{i}", None) for i in range(20)]
    cpu_jobs = [spec(f"c{i}", None, gpus_per_job=0) for i in range(3)]
    m = manifest(*gpu_jobs, *cpu_jobs)
    busy = running("busy", "h", [0], None)
    jobs = [busy, *waiting(*(s.id for s in gpu_jobs)), *waiting(*(s.id for s in cpu_jobs))]
    d = run(m, jobs, [host(used=(0,), max_cpu_jobs=2)])
    assert placed(d) == [("c0", "h", (), None), ("c1", "h", (), None)]


def test_without_any_packing_key_the_scheduler_is_unchanged() -> None:
    m = manifest(*(JobSpec(id=f"j{i}", phase="main", cmd="x") for i in range(3)))
    jobs = waiting("j0", "j1", "j2")
    hosts = [host(used=(0, 30 * GIB, 0))]
    legacy = decide(m, jobs, hosts, now=NOW, paused=False, preconditions={})
    assert [(x.job_id, x.gpus) for x in legacy.launches] == [("j0", (0,)), ("j1", (2,))]
    assert placed(run(m, jobs, hosts)) == [("j0", "h", (0,), None), ("j1", "h", (2,), None)]


def test_bigger_jobs_are_placed_first_and_small_ones_fill_in_around_them() -> None:
    # in queue order the two small jobs would take room the big one then lacks
    m = manifest(spec("small1", 10 * GIB), spec("small2", 10 * GIB), spec("big", 70 * GIB),
                 spec("mid", 40 * GIB))
    d = run(m, waiting("small1", "small2", "big", "mid"), [host(used=(0, 0))])
    assert placed(d) == [("big", "h", (0,), 70 * GIB), ("mid", "h", (1,), 40 * GIB),
                         ("small1", "h", (1,), 10 * GIB), ("small2", "h", (1,), 10 * GIB)]


def test_priority_still_comes_before_size() -> None:
    m = manifest(spec("small", 10 * GIB), spec("big", 75 * GIB))
    jobs = waiting("small", "big")
    jobs[0].priority = 5
    d = run(m, jobs, [host(used=(0,))])
    assert placed(d) == [("small", "h", (0,), 10 * GIB)]


def snapshot(used: tuple[int, ...], processes: list[GpuProcess]) -> HostSnapshot:
    gpus = tuple(GpuReading(i, f"GPU-{i}", "sim", u, 80 * GIB, 50) for i, u in enumerate(used))
    return HostSnapshot(host="h", ok=True, taken_at=NOW, gpus=gpus, processes=tuple(processes))


def test_an_attempts_usage_counts_its_whole_process_tree_and_no_one_elses() -> None:
    snap = snapshot((30 * GIB, 8 * GIB), [
        GpuProcess(100, "GPU-0", 10 * GIB, pgid=100, sid=100),  # the job itself
        GpuProcess(101, "GPU-0", 2 * GIB, pgid=100, sid=100),  # its DataLoader worker
        GpuProcess(102, "GPU-1", 3 * GIB, pgid=102, sid=100),  # a worker in its own group
        GpuProcess(200, "GPU-0", 18 * GIB, pgid=200, sid=200),  # someone else's
        GpuProcess(4000000, "GPU-1", 5 * GIB)])  # not even visible to ps
    groups = usage_by_group(snap)
    assert groups[100] == {0: 12 * GIB, 1: 3 * GIB}
    assert groups[200] == {0: 18 * GIB}
    assert others_by_gpu(snap, groups[100]) == {0: 18 * GIB, 1: 5 * GIB}


def test_someone_elses_memory_is_not_undercounted_when_a_job_allocates_between_queries() -> None:
    # the GPU was read (10 GiB: someone else's) before our job allocated 12 GiB, which the
    # process list, read a moment later, shows
    snap = snapshot((10 * GIB,), [GpuProcess(100, "GPU-0", 12 * GIB, pgid=100, sid=100),
                                  GpuProcess(200, "GPU-0", 10 * GIB, pgid=200, sid=200)])
    assert others_by_gpu(snap, {0: 12 * GIB}) == {0: 10 * GIB}
    # memory no listed process accounts for (a driver's, a container's) counts as someone's
    hidden = snapshot((15 * GIB,), [GpuProcess(100, "GPU-0", 5 * GIB, pgid=100, sid=100)])
    assert others_by_gpu(hidden, {0: 5 * GIB}) == {0: 10 * GIB}


def test_a_job_levels_off_soon_near_its_estimate_late_far_below_it() -> None:
    m = manifest(spec("a", 20 * GIB), spec("b", 20 * GIB), spec("c", 20 * GIB),
                 spec("d", 20 * GIB))
    near = running("a", "h", [0], 20 * GIB)
    low = running("b", "h", [0], 20 * GIB)
    usage = {"a": Usage(1, now={0: 16 * GIB}, peak=16 * GIB, grew_at=NOW - LEVEL_AFTER_S),
             "b": Usage(1, now={0: 2 * GIB}, peak=2 * GIB, grew_at=NOW - LEVEL_AFTER_S)}
    view = host(used=(18 * GIB,), others=(0,))
    # a (at 80 % of its estimate) holds its 16 GiB; b (still loading, at 10 %) its 20 GiB:
    # 80 - 16 - 20 - 1 = 43 GiB left, room for two more
    d = run(m, [near, low, *waiting("c", "d")], [view], usage=usage)
    assert [x.job_id for x in d.launches] == ["c", "d"]
    usage["b"] = Usage(1, now={0: 2 * GIB}, peak=2 * GIB, grew_at=NOW - LEVEL_LOW_S)
    plan = MemoryPlan(m.job_specs, usage, {}, NOW, cpu_jobs=any_without_gpu(m.job_specs.values()))
    assert plan.hold(low).mib == 2 * GIB  # flat for two minutes: what it shows is what it needs


def placer(m: Manifest, jobs: list[JobState], hosts: list[HostView]) -> MemoryPlacer:
    """The memory placer as `decide` builds it, for what `decide` does not show on its own."""
    plan = MemoryPlan(m.job_specs, {}, {}, NOW, cpu_jobs=any_without_gpu(m.job_specs.values()))
    active = [job for job in jobs if job.status == JobStatus.RUNNING]
    return MemoryPlacer(m, hosts, active, plan, m.job_specs)


def bare(name: str, *gpus: GpuView, **kwargs: Any) -> HostView:
    defaults: dict[str, Any] = {"usable": True, "allowed": None, "max_parallel": 64}
    defaults.update(kwargs)
    return HostView(name=name, gpus=gpus, **defaults)


def failed(job_id: str, host_name: str, gpus: list[int], failure: FailureClass,
           estimate: int = 10 * GIB) -> JobState:
    """A pending job whose last attempt, placed by memory, ended with `failure`."""
    job = JobState(id=job_id, phase="main", cmd="train")
    job.history.append(Attempt(n=1, host=host_name, gpus=gpus, session="s", attempt_dir="d",
                               log="l", estimate_mib=estimate, shared=True,
                               failure_class=failure))
    return job


def test_a_gpu_whose_other_processes_are_not_known_is_not_shared() -> None:
    m = manifest(spec("a"))
    d = run(m, waiting("a"), [bare("h", GpuView(0, 0, 80 * GIB, None))])
    assert d.waiting == {"a": "no GPU can be shared now; needs 18.0 GiB"}


def test_the_reason_names_the_roomiest_gpu_that_could_be_shared_on_a_host_with_a_slot() -> None:
    m = manifest(spec("r", 4 * GIB), spec("x", None), spec("big", 90 * GIB, gpus_per_job=2))
    # host a has the most room but no slot left; on b, GPU 0 is held alone, and GPUs 1 and 2
    # tie with 20 GiB left (of 41500 MiB: 40.5 GiB, shown as 41)
    full = host("a", used=(4 * GIB, 0), others=(0, 0), max_parallel=1)
    b = bare("b", GpuView(0, 0, 41500, 0), GpuView(1, 19996, 41500, 19996),
             GpuView(2, 19996, 41500, 19996), max_parallel=2)
    jobs = [running("r", "a", [0], 4 * GIB), running("x", "b", [0], None), *waiting("big")]
    d = run(m, jobs, [full, b])
    assert d.waiting == {
        "big": "b GPU 1 has 20.0 GiB free of 41; needs 90.0 on each of 2 GPUs of one host"}


def test_a_placer_without_a_slot_still_says_why_a_job_waits() -> None:
    m = manifest(spec("r", 4 * GIB), spec("g", 4 * GIB), spec("c", None, gpus_per_job=0))
    jobs = [running("r", "h", [0], 4 * GIB)]
    g, c = waiting("g", "c")
    seats = placer(m, jobs, [host(max_parallel=1)])
    assert seats.gpu_seat.capacity() == 0 and seats.cpu_seat.capacity() == 0
    assert seats.gpu_seat.place(g, m.job_specs["g"]) == (
        "every host runs as many jobs as its max_parallel allows")
    assert seats.cpu_seat.place(c, m.job_specs["c"]) == "waiting for a CPU slot (max_cpu_jobs)"
    nowhere = placer(m, [], [host(usable=False, max_cpu_jobs=2)])
    assert nowhere.cpu_seat.place(c, m.job_specs["c"]) == "waiting for a CPU slot (max_cpu_jobs)"


def test_cpu_jobs_go_to_the_host_with_the_most_cpu_slots_left() -> None:
    m = manifest(spec("c", None, gpus_per_job=0))
    d = run(m, waiting("c"), [host("a", max_cpu_jobs=1), host("b", max_cpu_jobs=3)])
    assert placed(d) == [("c", "b", (), None)]


def test_running_cpu_and_gpu_jobs_count_against_their_own_limits() -> None:
    gpu = [spec(f"g{i}", 25 * GIB) for i in range(6)]
    cpu = [spec(f"c{i}", None, gpus_per_job=0) for i in range(6)]
    m = manifest(*gpu, *cpu)
    # CPU jobs first: the GPU jobs after them must still be counted
    active = [running("c0", "h", [], None), running("c1", "h", [], None),
              running("g0", "h", [0], 30 * GIB), running("g1", "h", [0], 30 * GIB)]
    queue = [*active, *waiting("g2", "g3", "g4", "g5", "c2", "c3", "c4", "c5")]
    # GPU 0 holds 2 x 30 GiB: 19 GiB left, so the one GPU job that may start goes to GPU 1
    d = run(m, queue, [host(used=(0, 0), max_parallel=3, max_cpu_jobs=4)])
    assert placed(d) == [("g2", "h", (1,), 25 * GIB), ("c2", "h", (), None),
                         ("c3", "h", (), None)]
    assert run(m, queue, [host(used=(0, 0), max_parallel=2, max_cpu_jobs=2)]).launches == []


def test_max_jobs_per_gpu_counts_the_jobs_already_on_it() -> None:
    m = manifest(*(spec(f"j{i}", 1 * GIB) for i in range(5)))
    jobs = [running("j0", "h", [0], 1 * GIB), running("j1", "h", [0], 1 * GIB),
            *waiting("j2", "j3", "j4")]
    d = run(m, jobs, [host(max_jobs_per_gpu=3)])
    assert [x.job_id for x in d.launches] == ["j2"]


def test_a_gpu_at_its_max_jobs_per_gpu_takes_no_more_even_with_room() -> None:
    m = manifest(spec("r", 4 * GIB), spec("j", 20 * GIB))
    jobs = [running("r", "h", [0], 4 * GIB), *waiting("j")]
    d = run(m, jobs, [host(used=(4 * GIB, 70 * GIB), others=(0, 70 * GIB), max_jobs_per_gpu=1)])
    assert d.launches == []
    assert d.waiting == {"j": "h GPU 1 has 9.0 GiB free of 80; needs 20.0"}


def test_an_unreachable_host_and_what_ran_there_are_no_obstacle() -> None:
    m = manifest(spec("r", 10 * GIB), spec("j", 10 * GIB))
    jobs = [running("r", "gone", [0], 10 * GIB),
            failed("j", "gone", [0], FailureClass.CUDA_OOM)]
    d = run(m, jobs, [host("gone", usable=False), host("h")])
    assert placed(d) == [("j", "h", (0,), 10 * GIB)]


def test_a_running_job_holds_its_memory_on_each_of_its_gpus_we_may_use() -> None:
    m = manifest(spec("r", 30 * GIB, gpus_per_job=2), spec("j", 30 * GIB))
    # r spans GPUs 0 and 1; GPU 0 is quarantined now, and r still holds 60 GiB on GPU 1
    jobs = [running("r", "h", [0, 1], 60 * GIB), *waiting("j")]
    d = run(m, jobs, [host(used=(0, 0), quarantined=frozenset({0}))])
    assert d.waiting == {"j": "h GPU 1 has 19.0 GiB free of 80; needs 30.0"}


def test_only_allowed_gpus_that_are_not_quarantined_are_shared() -> None:
    m = manifest(spec("a", 50 * GIB), spec("b", 50 * GIB))
    view = host(used=(0, 0, 0), allowed=frozenset({0, 1}), quarantined=frozenset({1}))
    d = run(m, waiting("a", "b"), [view])
    assert placed(d) == [("a", "h", (0,), 50 * GIB)]


def test_a_gpu_reading_exactly_the_free_threshold_is_not_free_for_a_job_alone() -> None:
    m = manifest(spec("x", None))
    d = run(m, waiting("x"), [host(used=(m.gpu_free_threshold_mib,))])
    assert d.waiting == {"x": "waiting for 1 GPU(s) of one host to itself"}
    assert placed(run(m, waiting("x"), [host(used=(m.gpu_free_threshold_mib - 1,))])) == [
        ("x", "h", (0,), None)]


def test_max_parallel_caps_jobs_that_take_their_gpus_alone() -> None:
    m = manifest(*(spec(f"j{i}", None) for i in range(3)))
    d = run(m, waiting("j0", "j1", "j2"), [host(used=(0, 0, 0), max_parallel=2)])
    assert placed(d) == [("j0", "h", (0,), None), ("j1", "h", (1,), None)]


def test_a_host_at_max_parallel_is_passed_over_for_shared_jobs() -> None:
    m = manifest(spec("r", 4 * GIB), spec("j", 10 * GIB))
    jobs = [running("r", "a", [0], 4 * GIB), *waiting("j")]
    # a's GPU would be the best fit, but a runs as many jobs as it may
    d = run(m, jobs, [host("a", used=(4 * GIB,), others=(0,), max_parallel=1), host("b")])
    assert placed(d) == [("j", "b", (0,), 10 * GIB)]


def test_a_job_that_needs_exactly_what_is_left_fits() -> None:
    m = manifest(spec("j", 80 * GIB - 1024))  # the whole GPU but the margin
    assert placed(run(m, waiting("j"), [host()])) == [("j", "h", (0,), 80 * GIB - 1024)]


def test_a_shared_job_that_hung_or_hit_a_gpu_fault_never_goes_back_to_that_gpu() -> None:
    m = manifest(spec("j", 10 * GIB))
    for failure in (FailureClass.STALLED, FailureClass.GPU_FAULT):
        job = failed("j", "h", [0], failure)
        assert run(m, [job], [host()]).launches == []
        assert placed(run(m, [job], [host(used=(0, 0))])) == [("j", "h", (1,), 10 * GIB)]


def test_a_job_that_failed_otherwise_may_go_back_to_its_shared_gpu() -> None:
    m = manifest(spec("j", 10 * GIB), spec("other", 10 * GIB))
    other = running("other", "h", [0], 10 * GIB)
    job = failed("j", "h", [0], FailureClass.EXIT_NONZERO)
    assert placed(run(m, [other, job], [host()])) == [("j", "h", (0,), 10 * GIB)]


def test_after_a_shared_oom_the_job_may_go_back_once_nobody_else_is_on_its_gpu() -> None:
    m = manifest(spec("j", 10 * GIB))
    job = failed("j", "h", [0], FailureClass.CUDA_OOM)
    assert placed(run(m, [job], [host()])) == [("j", "h", (0,), 10 * GIB)]


def test_a_retry_on_shared_gpus_prefers_ones_it_did_not_just_fail_on() -> None:
    m = manifest(spec("r", 30 * GIB), spec("j", 10 * GIB))
    other = running("r", "h", [0], 30 * GIB)
    # GPU 0 is the fuller (best fit), but j just failed there
    job = failed("j", "h", [0], FailureClass.EXIT_NONZERO)
    assert placed(run(m, [other, job], [host(used=(0, 0))])) == [("j", "h", (1,), 10 * GIB)]
    # across hosts too: b's empty GPU rather than a's fuller one where j failed
    job = failed("j", "a", [0], FailureClass.EXIT_NONZERO)
    other = running("r", "a", [0], 30 * GIB)
    d = run(m, [other, job], [host("a"), host("b")])
    assert placed(d) == [("j", "b", (0,), 10 * GIB)]


def test_with_room_for_one_job_the_biggest_waiting_one_gets_it() -> None:
    m = manifest(spec("small", 10 * GIB), spec("big", 70 * GIB))
    d = run(m, waiting("small", "big"), [host(max_jobs_per_gpu=1)])
    assert placed(d) == [("big", "h", (0,), 70 * GIB)]


def test_the_size_order_looks_no_further_than_four_times_the_capacity_plus_16() -> None:
    smalls = [spec(f"s{i}", 10 * GIB) for i in range(20)]
    m = manifest(*smalls, spec("big", 70 * GIB))
    # capacity 1 (one seat): the first 20 waiting jobs are ordered by size, the 21st is not
    d = run(m, waiting(*(s.id for s in smalls), "big"), [host(max_jobs_per_gpu=1)])
    assert placed(d) == [("s0", "h", (0,), 10 * GIB)]


def test_a_jobs_size_is_its_memory_times_its_gpus() -> None:
    m = manifest(spec("one", 40 * GIB), spec("two", 30 * GIB, gpus_per_job=2))
    d = run(m, waiting("one", "two"), [host(used=(0, 0))])
    assert placed(d) == [("two", "h", (0, 1), 30 * GIB), ("one", "h", (0,), 40 * GIB)]


def test_capacity_counts_a_seat_per_4_gib_left_up_to_the_cap_or_8() -> None:
    m = manifest(spec("r", 4 * GIB), spec("x", None))
    empty = host()  # 79 GiB left: 19 x 4 GiB, 8 at most
    assert placer(m, [], [empty]).gpu_capacity() == 8
    assert placer(m, [], [host(used=(0, 0))]).gpu_capacity() == 16
    assert placer(m, [], [host(used=(0, 0), max_parallel=3)]).gpu_capacity() == 3
    assert placer(m, [], [host("a"), host("b")]).gpu_capacity() == 16
    one_there = [running("r", "h", [0], 4 * GIB)]
    assert placer(m, one_there, [host(max_jobs_per_gpu=3)]).gpu_capacity() == 2
    # any room left counts one seat (6 GiB, 1 MiB); none left, none
    for others, seats in ((73 * GIB, 1), (79 * GIB - 1, 1), (79 * GIB, 0)):
        assert placer(m, [], [host(used=(others,))]).gpu_capacity() == seats
    # a GPU one of our jobs has alone gives none, whatever it reads
    alone = [running("x", "h", [0], None)]
    assert placer(m, alone, [host(used=(0,))]).gpu_capacity() == 0


def test_capacity_counts_one_per_quiet_gpu_whose_room_is_not_known() -> None:
    m = manifest(spec("x", None))
    threshold = m.gpu_free_threshold_mib
    quiet = [GpuView(0, 0, 80 * GIB, None), GpuView(1, threshold - 1, 80 * GIB, None)]
    assert placer(m, [], [bare("h", *quiet)]).gpu_capacity() == 2
    assert placer(m, [], [bare("h", GpuView(0, threshold, 80 * GIB, None))]).gpu_capacity() == 0
    assert placer(m, [], [bare("h", GpuView(0, None, None, None))]).gpu_capacity() == 0


def test_a_job_the_manifest_no_longer_has_is_passed_over() -> None:
    m = manifest(spec("j", 10 * GIB))
    assert placed(run(m, waiting("gone", "j"), [host()])) == [("j", "h", (0,), 10 * GIB)]


def test_without_max_parallel_set_memory_alone_caps_the_jobs_sharing_a_host() -> None:
    m = manifest(*(spec(f"j{i}") for i in range(20)))
    views = [host(used=(0, 0, 0, 0), max_parallel=8, max_parallel_given=False)]
    d = run(m, waiting(*(f"j{i}" for i in range(20))), views)
    # 4 GPUs x 4 jobs of 18 GiB: the default 8 of max_parallel does not cut it to 8
    assert len(d.launches) == 16
    views = [host(used=(0, 0, 0, 0), max_parallel=8, max_parallel_given=True)]
    assert len(run(m, waiting(*(f"j{i}" for i in range(20))), views).launches) == 8


# ---- the last attempt after shared OOMs waits for GPUs alone, and keeps them for itself -------

def last_chance(host_name: str = "h", gpus: tuple[int, ...] = (0,)) -> JobState:
    """A job whose two attempts ran out of memory on shared GPUs: its third takes GPUs alone."""
    job = JobState(id="j", phase="main", cmd="train", status=JobStatus.FAILED_OOM, retry_at=NOW,
                   mem_escalation=2, attempts=2)
    job.history.append(Attempt(n=2, host=host_name, gpus=list(gpus), session="s",
                               attempt_dir="d", log="l", estimate_mib=15 * GIB, shared=True,
                               failure_class=FailureClass.CUDA_OOM))
    return job


WAITS = "alone (attempt 3 after CUDA OOMs on a shared GPU); nothing new is packed onto it"


def test_the_last_attempt_waits_for_the_gpu_it_ran_on_and_nothing_new_is_packed_there() -> None:
    m = manifest(spec("j", 10 * GIB), spec("a", 10 * GIB), spec("b", 10 * GIB),
                 spec("n", 10 * GIB))
    jobs = [running("a", "h", [0], 10 * GIB), running("b", "h", [1], 10 * GIB), last_chance(),
            *waiting("n")]
    d = run(m, jobs, [host(used=(10 * GIB, 10 * GIB), others=(0, 0))])
    assert d.waiting["j"] == f"waits for h GPU 0 {WAITS}"
    # GPU 0 had as much room as GPU 1: the new job goes to GPU 1 only because 0 is kept
    assert placed(d) == [("n", "h", (1,), 10 * GIB)]
    # the GPU it ran on, even when another is less crowded
    jobs = [running("a", "h", [0], 10 * GIB), running("b", "h", [0], 10 * GIB),
            running("n", "h", [1], 10 * GIB), last_chance()]
    d = run(m, jobs, [host(used=(20 * GIB, 10 * GIB), others=(0, 0))])
    assert d.waiting["j"] == f"waits for h GPU 0 {WAITS}"


def test_the_last_attempt_whose_host_is_gone_waits_for_the_least_crowded_gpus() -> None:
    m = manifest(spec("j", 10 * GIB), spec("a", 10 * GIB), spec("b", 10 * GIB),
                 spec("c", 10 * GIB))
    jobs = [running("a", "x", [0], 10 * GIB), running("b", "x", [0], 10 * GIB),
            running("c", "y", [0], 10 * GIB), last_chance("gone")]
    d = run(m, jobs, [host("x", used=(20 * GIB,), others=(0,)),
                      host("y", used=(10 * GIB,), others=(0,))])
    assert d.launches == [] and d.waiting["j"] == f"waits for y GPU 0 {WAITS}"


def test_the_last_attempt_of_a_multi_gpu_job_waits_for_the_emptiest_gpus_of_one_host() -> None:
    m = manifest(spec("j", 10 * GIB, gpus_per_job=2), *(spec(i, 10 * GIB) for i in "abc"))
    jobs = [running("a", "h", [0], 10 * GIB), running("b", "h", [1], 10 * GIB),
            running("c", "h", [1], 10 * GIB), last_chance("h")]
    d = run(m, jobs, [host("h", used=(10 * GIB, 20 * GIB, 10 * GIB), others=(0, 0, 0))])
    # it ran on GPU 0 only: two GPUs are needed, the two with the fewest jobs (2 has none)
    assert d.waiting["j"] == f"waits for h GPU 2, 0 {WAITS}"
    # no host has two GPUs: it says what it waits for
    d = run(m, [running("a", "x", [0], 10 * GIB), last_chance("x")],
            [host("x", used=(10 * GIB,), others=(0,))])
    assert d.waiting["j"] == "waiting for 2 GPU(s) of one host to itself"


def test_a_host_at_max_parallel_is_named_only_when_a_gpu_there_could_take_a_job() -> None:
    """The queue's reason: a GPU with room to share (even 1 MiB) or free for a job alone, on
    a host at its max_parallel, is the limit's fault; a full GPU, or one whose size is not
    known, is simply busy."""
    m = manifest(spec("a", 10 * GIB), spec("n", 10 * GIB))
    new = waiting("n")[0]

    def why(gpus: tuple[GpuView, ...], estimate: int | None = 10 * GIB) -> str | None:
        view = replace(host(max_parallel=1), gpus=gpus)
        return run(m, [running("a", "h", [0], estimate), new], [view]).why_waiting(new)

    limit, busy = "host limit max_parallel 1 reached", "no free GPU (1 of 1 busy)"
    assert why((GpuView(0, 10 * GIB, 80 * GIB, 0),)) == limit
    assert why((GpuView(0, 10 * GIB, 11 * GIB + 1, 0),)) == limit  # 1 MiB beyond the margin
    assert why((GpuView(0, 10 * GIB, 11 * GIB, 0),)) == busy  # nothing beyond the margin
    assert why((GpuView(0, 10 * GIB, None, 0),)) == busy  # size unknown
    assert why((GpuView(0, 10 * GIB, 80 * GIB, 0), GpuView(1, 0, 80 * GIB, 0)),
               estimate=None) == "host limit max_parallel 1 reached"
