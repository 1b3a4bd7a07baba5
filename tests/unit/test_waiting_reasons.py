"""Every waiting job that a tick does not launch says why (Decision.why_waiting), whether or not
decide() looked at it: the queue paused, a retry time, a phase, the crash guard, a bigger job
placed first, no free GPU, a host's max_parallel."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.decide.scheduler import Decision, GpuView, HostView, PhaseLimit, decide
from eq_tui.engine.tick.memory import MemoryPlan, any_without_gpu
from eq_tui.manifest.model import JobSpec, Manifest, PhaseSpec
from tests.unit.test_scheduler_reference import EXAMPLES, scenarios

GIB = 1024
NOW = 1000.0


def spec(id: str, mem: int | None = None, **kwargs: Any) -> JobSpec:
    return JobSpec(id=id, phase=kwargs.pop("phase", "main"), cmd="train", mem_mib=mem,
                   family="main", **kwargs)


def manifest(*specs: JobSpec, **kwargs: Any) -> Manifest:
    return replace(Manifest(project="p", source="m.yaml", jobs=specs), **kwargs)


def host(used: tuple[int, ...] = (0,), total: int = 80 * GIB, **kwargs: Any) -> HostView:
    gpus = tuple(GpuView(i, u, total, u) for i, u in enumerate(used))
    defaults: dict[str, Any] = {"usable": True, "allowed": None, "max_parallel": 8}
    return HostView(name="h", gpus=gpus, **{**defaults, **kwargs})


def jobs(m: Manifest) -> list[JobState]:
    return [JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in m.jobs]


def running(job: JobState, gpus: list[int]) -> JobState:
    job.status = JobStatus.RUNNING
    job.history.append(Attempt(n=1, host="h", gpus=gpus, session="s", attempt_dir="d", log="l"))
    return job


def reasons(d: Decision, states: list[JobState]) -> dict[str, str | None]:
    return {job.id: d.why_waiting(job) for job in states}


def decide_now(m: Manifest, states: list[JobState], hosts: list[HostView], *,
               packing: bool = False, **kwargs: Any) -> Decision:
    plan = MemoryPlan(m.job_specs, {}, {}, NOW, cpu_jobs=any_without_gpu(
        m.job_specs.values())) if packing else None
    return decide(m, states, hosts, now=NOW, paused=kwargs.pop("paused", False),
                  preconditions={}, memory=plan, **kwargs)


def test_small_jobs_listed_first_say_they_wait_behind_the_bigger_job_packed_first() -> None:
    # the case: two 10 GiB jobs listed first, a whole-card job third, one 80 GiB GPU
    m = manifest(spec("small1", 10 * GIB), spec("small2", 10 * GIB), spec("whole"))
    states = jobs(m)
    d = decide_now(m, states, [host()], packing=True)
    assert [x.job_id for x in d.launches] == ["whole"]
    assert reasons(d, states) == {
        "small1": "behind a bigger job (packing order): whole went first",
        "small2": "behind a bigger job (packing order): whole went first",
        "whole": None}


def test_with_every_gpu_busy_the_jobs_say_no_free_gpu_without_being_looked_at() -> None:
    m = manifest(*(spec(f"j{i}") for i in range(3)))
    states = jobs(m)
    d = decide_now(m, states, [host(used=(9000, 9000, 9000, 9000))])
    assert set(reasons(d, states).values()) == {"no free GPU (4 of 4 busy)"}


def test_gpus_our_jobs_hold_are_busy_too() -> None:
    m = manifest(*(spec(f"j{i}") for i in range(4)))
    states = jobs(m)
    running(states[0], [0])
    running(states[1], [1])
    d = decide_now(m, states, [host(used=(0, 0))])
    assert reasons(d, states) == {"j0": None, "j1": None, "j2": "no free GPU (2 of 2 busy)",
                                  "j3": "no free GPU (2 of 2 busy)"}


def test_a_host_at_max_parallel_names_its_limit() -> None:
    m = manifest(*(spec(f"j{i}") for i in range(4)))
    states = jobs(m)
    running(states[0], [0])
    running(states[1], [1])
    d = decide_now(m, states, [host(used=(0, 0, 0, 0), max_parallel=2)])
    assert reasons(d, states)["j3"] == "host limit max_parallel 2 reached"


def test_a_full_shared_gpu_says_what_it_has_and_what_the_job_needs() -> None:
    m = manifest(spec("a", 40 * GIB), spec("b", 40 * GIB), spec("c", 40 * GIB))
    d = decide_now(m, jobs(m), [host()], packing=True)
    assert [x.job_id for x in d.launches] == ["a"]
    assert d.why_waiting(jobs(m)[1]) == "h GPU 0 has 39.0 GiB free of 80; needs 40.0"


def test_a_job_waiting_for_its_retry_says_when_and_after_what() -> None:
    m = manifest(spec("oom"), spec("port"))
    oom, port = jobs(m)
    for job, status, cls in ((oom, JobStatus.FAILED_OOM, FailureClass.CUDA_OOM),
                             (port, JobStatus.PENDING, FailureClass.PORT_IN_USE)):
        running(job, [0])
        job.status, job.retry_at = status, NOW + 11.5
        assert job.current is not None
        job.current.failure_class = cls
    d = decide_now(m, [oom, port], [host(used=(0, 0))])
    assert d.launches == []
    due = time.strftime("%H:%M:%S", time.localtime(NOW + 11.5))
    # a clock time, not a countdown: the record does not change every tick while it waits
    assert reasons(d, [oom, port]) == {"oom": f"retry at {due} (OOM)",
                                       "port": f"retry at {due} (port_in_use)"}
    later = decide_now(m, [oom, port], [host(used=(0, 0))])
    assert reasons(later, [oom, port]) == reasons(d, [oom, port])


def test_a_dependent_phase_says_which_phase_it_waits_for() -> None:
    phases = (PhaseSpec("train"), PhaseSpec("eval", depends_on=("train",)))
    m = manifest(spec("t", phase="train"), spec("e", phase="eval"), phases=phases)
    states = jobs(m)
    d = decide_now(m, states, [host(used=(0, 0))])
    assert reasons(d, states) == {"t": None, "e": "waits for phase train"}


def test_a_phase_the_crash_guard_holds_says_so_even_with_no_gpu_free() -> None:
    m = manifest(spec("a"), spec("b"))
    states = jobs(m)
    held = {"main": PhaseLimit(0, "crash guard: 2 jobs of phase main failed")}
    d = decide_now(m, states, [host(used=(9000,))], limits=held)
    assert set(reasons(d, states).values()) == {"crash guard: 2 jobs of phase main failed"}


def test_paused_and_strict_waves_hold_every_waiting_job() -> None:
    m = manifest(spec("a"), spec("b"))
    states = jobs(m)
    assert set(reasons(decide_now(m, states, [host()], paused=True), states).values()) == {
        "the queue is paused"}
    strict = replace(m, waves="strict")
    running(states[0], [0])
    d = decide_now(strict, states, [host(used=(0, 0))])
    assert reasons(d, states) == {
        "a": None, "b": "waves: strict; waits for the running wave to end"}


def test_jobs_past_the_lookahead_say_they_are_behind_the_ones_looked_at() -> None:
    m = manifest(*(spec(f"j{i}", gpus_per_job=2) for i in range(6)))
    states = jobs(m)
    d = decide_now(m, states, [host(used=(0,))])  # one GPU: capacity 1, lookahead 4
    got = reasons(d, states)
    assert {got[f"j{i}"] for i in range(4)} == {"waiting for 2 free GPU(s) on one host"}
    assert got["j4"] == got["j5"] == "in the queue behind the 4 jobs looked at this tick"


def test_cpu_jobs_say_they_wait_for_a_cpu_slot() -> None:
    m = manifest(spec("gpu", 10 * GIB), *(spec(f"c{i}", gpus_per_job=0) for i in range(3)))
    states = jobs(m)
    d = decide_now(m, states, [host(max_cpu_jobs=1)], packing=True)
    got = reasons(d, states)
    assert [got[f"c{i}"] for i in range(3)].count(None) == 1
    assert {got[f"c{i}"] for i in range(3)} - {None} == {"waiting for a CPU slot (max_cpu_jobs)"}


def test_gpu_and_cpu_jobs_beyond_what_a_tick_looks_at_each_keep_their_queues_reason() -> None:
    """Each queue stops at its lookahead; the jobs past it say their own queue's reason (the
    CPU queue's never in the GPU queue's place)."""
    m = manifest(*(spec(f"g{i}") for i in range(8)),
                 *(spec(f"c{i}", gpus_per_job=0) for i in range(8)))
    states = jobs(m)
    got = reasons(decide_now(m, states, [host(max_cpu_jobs=1)], packing=True), states)
    assert got == {"g0": None, "c0": None,
                   **{f"g{i}": "no free GPU (1 of 1 busy)" for i in range(1, 8)},
                   **{f"c{i}": "waiting for a CPU slot (max_cpu_jobs)" for i in range(1, 8)}}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_every_waiting_job_not_launched_or_blocked_has_a_reason(case: dict[str, Any],
                                                               packing: bool) -> None:
    m = case["manifest"]
    states = case["jobs"]
    plan = MemoryPlan(m.job_specs, {}, {}, case["now"], cpu_jobs=any_without_gpu(
        m.job_specs.values())) if packing else None
    d = decide(m, states, case["hosts"], now=case["now"], paused=case["paused"],
               preconditions=case["preconditions"], memory=plan)
    launched = {x.job_id for x in d.launches}
    for job in states:
        reason = d.why_waiting(job)
        if job.status in (JobStatus.PENDING, JobStatus.FAILED_OOM) and job.id not in launched \
                and job.id not in d.block:
            assert reason, (job.id, job.status, d)
        else:
            assert reason is None


# ---- what mutation testing found unpinned in decide() -----------------------------------------

GUARD = "crash guard: 1 job(s) of phase main failed before any progress; waiting"


def test_a_phase_with_one_launch_left_names_the_guard_only_once_it_is_used() -> None:
    m = manifest(spec("a"), spec("b"))
    states = jobs(m)
    limit = {"main": PhaseLimit(1, GUARD)}
    busy = decide_now(m, states, [host(used=(80 * GIB,))], limits=limit)
    assert busy.launches == [] and reasons(busy, states)["a"].startswith("no free GPU")
    room = decide_now(m, states, [host(used=(0, 0))], limits=limit)
    assert [x.job_id for x in room.launches] == ["a"]
    assert reasons(room, states) == {"a": None, "b": GUARD}
    # one GPU: b is not even looked at once a took it; the guard is still its reason
    one = decide_now(m, states, [host(used=(0,))], limits=limit)
    assert [x.job_id for x in one.launches] == ["a"]
    assert reasons(one, states) == {"a": None, "b": GUARD}


def test_a_paused_queue_with_phases_says_paused() -> None:
    m = replace(manifest(spec("a"), spec("z", phase="eval")),
                phases=(PhaseSpec("main"), PhaseSpec("eval", depends_on=("main",))))
    states = jobs(m)
    d = decide_now(m, states, [host(used=(0,))], paused=True)
    assert reasons(d, states)["a"] == "the queue is paused" == d.shared_reason()


def test_the_shared_reason_is_the_queues_when_nothing_stops_all() -> None:
    m = manifest(spec("a"))
    states = jobs(m)
    d = decide_now(m, states, [host(used=(80 * GIB,))])
    assert d.shared_reason() == reasons(d, states)["a"] == "no free GPU (1 of 1 busy)"


def floored(job_id: str, floor: int, priority: int = 0) -> JobState:
    return JobState(id=job_id, phase="main", cmd="train", min_gpu_mib=floor,
                    priority=priority)


def test_the_largest_floor_is_placed_first_and_priority_orders_one_floor() -> None:
    m = manifest(spec("x"), spec("y"), spec("p"))
    big = host(used=(0,), total=80 * GIB)
    d = decide_now(m, [floored("x", 40 * GIB), floored("y", 60 * GIB)], [big])
    assert [x.job_id for x in d.launches] == ["y"]
    d = decide_now(m, [floored("x", 40 * GIB), floored("p", 40 * GIB, priority=1)], [big])
    assert [x.job_id for x in d.launches] == ["p"]


def test_jobs_with_a_floor_alone_never_go_to_a_smaller_gpu() -> None:
    m = manifest(spec("x"))
    states = [floored("x", 40 * GIB)]
    d = decide_now(m, states, [host(used=(0,), total=24 * GIB)])
    assert d.launches == []
    assert reasons(d, states)["x"].endswith(
        "needs a GPU with more than 40.0 GiB (its last CUDA OOM asked that much)")


def test_a_job_whose_preconditions_are_being_checked_does_not_hold_up_the_next() -> None:
    from eq_tui.manifest.model import Precondition

    m = manifest(spec("a", preconditions=(Precondition("checkpoint_exists", "ckpt"),)),
                 spec("b"))
    states = jobs(m)
    d = decide_now(m, states, [host(used=(0, 0))])
    assert [x.job_id for x in d.launches] == ["b"] and d.check_preconditions == ["a"]
    assert reasons(d, states)["a"] == "checking preconditions"


def test_a_job_with_a_floor_waiting_for_its_retry_time_says_so() -> None:
    m = manifest(spec("x"))
    job = floored("x", 40 * GIB)
    job.retry_at = NOW + 30
    d = decide_now(m, [job], [host(used=(0,), total=24 * GIB)])
    why = reasons(d, [job])["x"]
    assert why is not None and "needs a GPU with more than" not in why
