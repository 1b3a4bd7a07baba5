"""The scheduler's decision is a pure function: jobs + host views + clock -> launches."""

from dataclasses import replace

from eq_tui.engine.model import Attempt, JobState, JobStatus
from eq_tui.engine.scheduler import GpuView, HostView, decide, free_gpus, gpu_holders
from eq_tui.manifest.model import JobSpec, Manifest, PhaseSpec, Precondition


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
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={"j0": False})
    assert d.launches == [] and "ckpt.pt" in d.waiting["j0"]
    d = decide(m, states(m), [host()], now=0, paused=False, preconditions={"j0": True})
    assert [x.job_id for x in d.launches] == ["j0"]
