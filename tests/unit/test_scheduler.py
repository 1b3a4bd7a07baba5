"""The scheduler's decision is a pure function: jobs + host views + clock -> launches."""

from dataclasses import replace

from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.decide.scheduler import (
    GpuView,
    HostView,
    PhaseGate,
    PhaseLimit,
    decide,
    free_gpus,
    gpu_holders,
    phase_gates,
)
from eq_tui.manifest.model import EnvVar, JobSpec, Manifest, PhaseSpec, Precondition


def manifest(n_jobs: int = 4, **kwargs: object) -> Manifest:
    jobs = tuple(JobSpec(id=f"j{i}", phase="main", cmd=f"run {i}") for i in range(n_jobs))
    base = Manifest(project="p", source="m.yaml", jobs=jobs)
    return replace(base, **kwargs)  # type: ignore[arg-type]


def states(m: Manifest) -> list[JobState]:
    return [JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in m.jobs]


def place(job: JobState, status: JobStatus, host: str, gpus: list[int]) -> None:
    """The job's current attempt runs on these GPUs (where a job runs is its attempt's)."""
    job.status = status
    job.history.append(Attempt(n=len(job.history) + 1, host=host, gpus=gpus, session="s",
                               attempt_dir="d", log="l"))


def host(name: str = "h", used: tuple[int | None, ...] = (0, 0), **kwargs: object) -> HostView:
    gpus = tuple(GpuView(i, u) for i, u in enumerate(used))
    defaults: dict[str, object] = {"usable": True, "allowed": None, "max_parallel": 8}
    defaults.update(kwargs)
    return HostView(name=name, gpus=gpus, **defaults)  # type: ignore[arg-type]


def test_free_means_strictly_below_the_threshold() -> None:
    view = host(used=(499, 500, 501, None))
    assert free_gpus(view, {}, 500) == [0]


def test_gpu_held_by_our_launching_or_running_job_is_never_reused() -> None:
    m = manifest(3)
    jobs = states(m)
    place(jobs[0], JobStatus.LAUNCHING, "h", [0])
    place(jobs[1], JobStatus.RUNNING, "h", [1])
    # memory reads 0 (the new job has not allocated yet): the reservation still holds
    d = decide(m, jobs, [host(used=(0, 0, 0))], now=0, paused=False, preconditions={})
    assert [(x.job_id, x.gpus) for x in d.launches] == [("j2", (2,))]
    assert gpu_holders(jobs) == {("h", 0): "j0", ("h", 1): "j1"}


def test_lingering_memory_delays_the_next_launch() -> None:
    m = manifest(1)
    d = decide(m, states(m), [host(used=(900,))], now=0, paused=False, preconditions={})
    assert d.launches == []
    d = decide(m, states(m), [host(used=(10,))], now=0, paused=False, preconditions={})
    assert len(d.launches) == 1


def test_allowed_list_max_parallel_and_quarantine() -> None:
    m = manifest(4)
    view = host(used=(0, 0, 0, 0), allowed=frozenset({1, 2, 3}), max_parallel=2,
                quarantined=frozenset({1}))
    d = decide(m, states(m), [view], now=0, paused=False, preconditions={})
    assert [x.gpus for x in d.launches] == [(2,), (3,)]


def test_unusable_host_gets_nothing_and_paused_launches_nothing() -> None:
    m = manifest(2)
    assert decide(m, states(m), [host(usable=False)], now=0, paused=False,
                  preconditions={}).launches == []
    assert decide(m, states(m), [host()], now=0, paused=True, preconditions={}).launches == []


def test_spreads_over_hosts_with_most_free_gpus() -> None:
    m = manifest(2)
    d = decide(m, states(m), [host("a", (0,)), host("b", (0, 0, 0))], now=0, paused=False,
               preconditions={})
    assert [x.host for x in d.launches] == ["b", "b"]


def test_oom_retry_waits_for_its_delay_and_prefers_another_gpu() -> None:
    m = manifest(1)
    jobs = states(m)
    job = jobs[0]
    job.status, job.retry_at, job.attempts = JobStatus.FAILED_OOM, 100.0, 1
    job.history.append(Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d", log="l"))
    assert decide(m, jobs, [host()], now=99, paused=False, preconditions={}).launches == []
    d = decide(m, jobs, [host()], now=100, paused=False, preconditions={})
    assert [(x.host, x.gpus) for x in d.launches] == [("h", (1,))]
    # only the GPU it failed on is free: it may still use it
    d = decide(m, jobs, [host(used=(0, 9000))], now=100, paused=False, preconditions={})
    assert [x.gpus for x in d.launches] == [(0,)]


def test_multi_gpu_jobs_need_all_gpus_on_one_host() -> None:
    m = manifest(1)
    m = replace(m, jobs=(replace(m.jobs[0], gpus_per_job=2),))
    d = decide(m, states(m), [host("a", (0, 900)), host("b", (0, 0))], now=0, paused=False,
               preconditions={})
    assert [(x.host, x.gpus) for x in d.launches] == [("b", (0, 1))]


def test_strict_waves_wait_for_the_whole_wave() -> None:
    m = manifest(3, waves="strict")
    jobs = states(m)
    place(jobs[0], JobStatus.RUNNING, "h", [0])
    d = decide(m, jobs, [host(used=(0, 0, 0))], now=0, paused=False, preconditions={})
    assert d.launches == []
    jobs[0].status = JobStatus.COMPLETED
    d = decide(m, jobs, [host(used=(0, 0, 0))], now=0, paused=False, preconditions={})
    assert len(d.launches) == 2  # j1 and j2 together: the next wave


def _phased() -> Manifest:
    jobs = (JobSpec(id="t1", phase="teach", cmd="t"), JobSpec(id="t2", phase="teach", cmd="t"),
            JobSpec(id="s1", phase="distill", cmd="s"))
    phases = (PhaseSpec("teach"), PhaseSpec("distill", depends_on=("teach",)))
    return Manifest(project="p", source="m", jobs=jobs, phases=phases)


def test_dependent_phase_waits_then_starts() -> None:
    m = _phased()
    jobs = states(m)
    d = decide(m, jobs, [host(used=(0, 0, 0, 0))], now=0, paused=False, preconditions={})
    assert [x.job_id for x in d.launches] == ["t1", "t2"]
    jobs[0].status = JobStatus.COMPLETED
    place(jobs[1], JobStatus.RUNNING, "h", [1])
    d = decide(m, jobs, [host(used=(0, 0, 0, 0))], now=0, paused=False, preconditions={})
    assert d.launches == []
    jobs[1].status = JobStatus.COMPLETED
    d = decide(m, jobs, [host(used=(0, 0, 0, 0))], now=0, paused=False, preconditions={})
    assert [x.job_id for x in d.launches] == ["s1"]


def test_failed_dependency_blocks_or_runs_by_policy() -> None:
    m = _phased()
    jobs = states(m)
    jobs[0].status = JobStatus.COMPLETED
    jobs[1].status = JobStatus.STUCK
    d = decide(m, jobs, [host()], now=0, paused=False, preconditions={})
    assert "s1" in d.block and "t2" in d.block["s1"]
    m_run = replace(m, phases=(m.phases[0], replace(m.phases[1], on_dependency_failure="run")))
    d = decide(m_run, jobs, [host()], now=0, paused=False, preconditions={})
    assert d.block == {} and [x.job_id for x in d.launches] == ["s1"]


def test_preconditions_need_a_fresh_positive_probe() -> None:
    m = manifest(1)
    pre = (Precondition(type="checkpoint_exists", path="ckpt.pt"),)
    m = replace(m, jobs=(replace(m.jobs[0], preconditions=pre),))
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={})
    assert d.launches == [] and d.check_preconditions == ["j0"]
    assert d.waiting == {"j0": "checking preconditions"}
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={"j0": False})
    assert d.launches == [] and "ckpt.pt" in d.waiting["j0"]
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={"j0": True})
    assert [x.job_id for x in d.launches] == ["j0"]


# ---- pinned by mutation testing: counts, limits and tie-breaks ---------------------------------

def launched(d: object) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(x.job_id, x.host, x.gpus) for x in d.launches]  # type: ignore[attr-defined]


def test_a_busy_gpu_is_skipped_not_the_rest_of_the_host() -> None:
    m = manifest(1)
    d = decide(m, states(m), [host(used=(9000, 0))], now=0, paused=False, preconditions={})
    assert launched(d) == [("j0", "h", (1,))]


def test_max_parallel_counts_the_jobs_already_running_there() -> None:
    m = manifest(4)
    jobs = states(m)
    place(jobs[0], JobStatus.RUNNING, "h", [0])
    d = decide(m, jobs, [host(used=(0, 0, 0, 0), max_parallel=2), host("other", (0,))],
               now=0, paused=False, preconditions={})
    assert launched(d) == [("j1", "h", (1,)), ("j2", "other", (0,))]


def test_each_launch_takes_a_slot() -> None:
    m = manifest(3)
    d = decide(m, states(m), [host(used=(0, 0, 0), max_parallel=1)], now=0, paused=False,
               preconditions={})
    assert launched(d) == [("j0", "h", (0,))]


def test_a_job_due_exactly_now_is_due() -> None:
    m = manifest(1)
    jobs = states(m)
    jobs[0].retry_at = 10.0
    assert launched(decide(m, jobs, [host()], now=10.0, paused=False, preconditions={}))
    jobs[0].status = JobStatus.FAILED_OOM
    assert launched(decide(m, jobs, [host()], now=10.0, paused=False, preconditions={}))
    assert not decide(m, jobs, [host()], now=9.9, paused=False, preconditions={}).launches


def test_the_lookahead_is_twice_the_capacity_and_at_least_four() -> None:
    def with_blocked(n_blocked: int, gpus: int) -> list[tuple[str, str, tuple[int, ...]]]:
        blocked = [JobSpec(id=f"p{i}", phase="main", cmd="run",
                           preconditions=(Precondition(type="checkpoint_exists", path=f"ck{i}"),))
                   for i in range(n_blocked)]
        specs = (*blocked, JobSpec(id="go", phase="main", cmd="run"))
        m = Manifest(project="p", source="m.yaml", jobs=specs)
        d = decide(m, states(m), [host(used=(0,) * gpus)], now=0, paused=False,
                   preconditions={f"p{i}": False for i in range(n_blocked)})
        return launched(d)

    # capacity 3: six jobs are looked at, the seventh is not
    assert with_blocked(5, 3) == [("go", "h", (0,))]
    assert with_blocked(6, 3) == []
    # capacity 1: still four
    assert with_blocked(3, 1) == [("go", "h", (0,))]
    assert with_blocked(4, 1) == []


def test_unmet_preconditions_are_checked_again_and_named() -> None:
    spec = JobSpec(id="s", phase="main", cmd="run", preconditions=(
        Precondition(type="checkpoint_exists", path="a.pt"),
        Precondition(type="checkpoint_exists", path="b.pt")))
    m = Manifest(project="p", source="m.yaml", jobs=(spec,))
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={"s": False})
    assert d.check_preconditions == ["s"] and d.launches == []
    assert d.waiting == {"s": "precondition not met: a.pt, b.pt"}


def test_a_job_too_big_for_every_host_says_what_it_waits_for() -> None:
    m = Manifest(project="p", source="m.yaml",
                 jobs=(JobSpec(id="big", phase="main", cmd="run", gpus_per_job=2),))
    d = decide(m, states(m), [host(used=(0, 9000))], now=0, paused=False, preconditions={})
    assert d.waiting == {"big": "waiting for 2 free GPU(s) on one host"}


def test_a_retry_prefers_another_host_to_the_gpu_it_just_failed_on() -> None:
    m = manifest(1)
    jobs = states(m)
    jobs[0].history.append(Attempt(n=1, host="a", gpus=[0], session="s", attempt_dir="d",
                                   log="l"))
    d = decide(m, jobs, [host("a", (0,)), host("b", (0,))], now=0, paused=False,
               preconditions={})
    assert launched(d) == [("j0", "b", (0,))]
    # with no other choice, the same GPU
    d = decide(m, jobs, [host("a", (0,))], now=0, paused=False, preconditions={})
    assert launched(d) == [("j0", "a", (0,))]


def test_a_tie_goes_to_the_first_host_in_the_manifest() -> None:
    m = manifest(1)
    d = decide(m, states(m), [host("a", (0, 0)), host("b", (0, 0))], now=0, paused=False,
               preconditions={})
    assert launched(d) == [("j0", "a", (0,))]


def phased(*jobs: tuple[str, str, JobStatus]) -> tuple[Manifest, list[JobState]]:
    phases = (PhaseSpec("a"), PhaseSpec("b", depends_on=("a",)), PhaseSpec("c"))
    m = Manifest(project="p", source="m.yaml", phases=phases,
                 jobs=tuple(JobSpec(id=i, phase=ph, cmd="run") for i, ph, _ in jobs))
    states_ = [JobState(id=i, phase=ph, cmd="run", status=st) for i, ph, st in jobs]
    for job in states_:
        if job.status in (JobStatus.RUNNING, JobStatus.LAUNCHING):
            place(job, job.status, "h", [3])
    return m, states_


def test_a_running_dependency_listed_after_other_phases_still_holds_the_phase_back() -> None:
    m, jobs = phased(("c0", "c", JobStatus.COMPLETED), ("a0", "a", JobStatus.RUNNING),
                     ("b0", "b", JobStatus.PENDING))
    d = decide(m, jobs, [host(used=(0, 0, 0, 0))], now=0, paused=False, preconditions={})
    assert d.launches == [] and phase_gates(m, jobs)["b"] == PhaseGate(ready=False)


def test_a_blocked_phase_blocks_its_pending_jobs_and_launches_none_of_the_others() -> None:
    m, jobs = phased(("a0", "a", JobStatus.STUCK), ("b0", "b", JobStatus.PENDING),
                     ("b1", "b", JobStatus.FAILED_OOM), ("c0", "c", JobStatus.PENDING))
    jobs[2].retry_at = 0.0
    d = decide(m, jobs, [host(used=(0, 0))], now=0, paused=False, preconditions={})
    assert phase_gates(m, jobs)["b"] == PhaseGate(False, "phase a: a0 ended stuck")
    assert d.block == {"b0": "phase a: a0 ended stuck"}  # not b1 (not pending), not c0
    assert launched(d) == [("c0", "h", (0,))]


def test_a_full_host_gets_no_slot_and_every_running_job_counts() -> None:
    m = manifest(4)
    jobs = states(m)
    for job, gpu in ((jobs[0], 0), (jobs[1], 1)):
        place(job, JobStatus.RUNNING, "h", [gpu])
    view = host(used=(0, 0, 0, 0), max_parallel=3)
    assert launched(decide(m, jobs, [view], now=0, paused=False, preconditions={})) == [
        ("j2", "h", (2,))]
    full = host(used=(0, 0, 0, 0), max_parallel=2)
    assert decide(m, jobs, [full], now=0, paused=False, preconditions={}).launches == []


def test_a_job_the_manifest_no_longer_has_is_passed_over() -> None:
    m = manifest(2)
    jobs = [JobState(id="gone", phase="main", cmd="run"), *states(m)]
    assert launched(decide(m, jobs, [host(used=(0,))], now=0, paused=False,
                           preconditions={})) == [("j0", "h", (0,))]


def test_a_job_that_does_not_fit_lets_a_smaller_one_behind_it_start() -> None:
    m = Manifest(project="p", source="m.yaml",
                 jobs=(JobSpec(id="big", phase="main", cmd="run", gpus_per_job=2),
                       JobSpec(id="small", phase="main", cmd="run")))
    d = decide(m, states(m), [host(used=(0, 9000))], now=0, paused=False, preconditions={})
    assert launched(d) == [("small", "h", (0,))]
    assert d.waiting == {"big": "waiting for 2 free GPU(s) on one host"}


def test_a_job_that_hung_or_hit_a_gpu_fault_never_goes_back_to_that_gpu() -> None:
    m = manifest(1)
    for failure in (FailureClass.STALLED, FailureClass.GPU_FAULT):
        jobs = states(m)
        jobs[0].history.append(Attempt(n=1, host="a", gpus=[0], session="s", attempt_dir="d",
                                       log="l", failure_class=failure))
        # only its old GPU is free: it waits rather than go back
        assert decide(m, jobs, [host("a", (0,))], now=0, paused=False,
                      preconditions={}).launches == []
        # exactly one other GPU on the same host is enough
        assert launched(decide(m, jobs, [host("a", (0, 0))], now=0, paused=False,
                               preconditions={})) == [("j0", "a", (1,))]
        # a host with nothing but the old GPU is passed over for the next one
        d = decide(m, jobs, [host("a", (0,)), host("b", (0,))], now=0, paused=False,
                   preconditions={})
        assert launched(d) == [("j0", "b", (0,))]


def test_priority_orders_the_queue_even_when_no_job_has_priority_0() -> None:
    m = manifest(3)
    jobs = states(m)
    for job, priority in zip(jobs, (1, 3, 2), strict=True):
        job.priority = priority
    d = decide(m, jobs, [host(used=(0, 0))], now=0, paused=False, preconditions={})
    assert launched(d) == [("j1", "h", (0,)), ("j2", "h", (1,))]


def test_the_specs_given_are_used_over_the_manifests() -> None:
    m = manifest(1)
    added = JobSpec(id="added", phase="main", cmd="run", gpus_per_job=2)
    jobs = [JobState(id="added", phase="main", cmd="run")]
    d = decide(m, jobs, [host()], now=0, paused=False, preconditions={},
               specs={"added": added})
    assert launched(d) == [("added", "h", (0, 1))]


def test_a_phase_limit_caps_its_launches_and_says_why_without_holding_other_phases() -> None:
    phases = (PhaseSpec("a"), PhaseSpec("b"))
    specs = tuple(JobSpec(id=i, phase=i[0], cmd="run") for i in ("a0", "a1", "a2", "a3", "b0"))
    m = Manifest(project="p", source="m.yaml", jobs=specs, phases=phases)
    limits = {"a": PhaseLimit(2, "crash guard: wait")}
    d = decide(m, states(m), [host(used=(0,) * 6)], now=0, paused=False, preconditions={},
               limits=limits)
    assert [x.job_id for x in d.launches] == ["a0", "a1", "b0"]
    assert d.waiting == {"a2": "crash guard: wait", "a3": "crash guard: wait"}


def test_without_a_secret_no_job_launches_and_a_failed_dependency_still_blocks() -> None:
    token = EnvVar(value="", secret=True, from_env="TOKEN", provided=False)
    m = replace(_phased(), env={"TOKEN": token})
    jobs = [JobState(id="t1", phase="teach", cmd="t", status=JobStatus.STUCK),
            JobState(id="t2", phase="teach", cmd="t"),
            JobState(id="s1", phase="distill", cmd="s"),
            JobState(id="s2", phase="distill", cmd="s", status=JobStatus.FAILED_OOM),
            JobState(id="r", phase="teach", cmd="t", status=JobStatus.RUNNING),
            JobState(id="gone", phase="dropped", cmd="x")]
    d = decide(m, jobs, [host()], now=0, paused=False, preconditions={})
    assert d.launches == []
    assert d.block == {"s1": "phase teach: t1 ended stuck"}
    missing = "secret TOKEN not provided"
    assert d.waiting == {"t2": missing, "s2": missing, "gone": missing}
