"""What a probe says about an attempt, and the status it leads to."""

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.judge import (
    Exited,
    Lost,
    NeverStarted,
    Running,
    Verdict,
    observe,
    verdict_for_exit,
    verdict_for_lost,
)
from eq_tui.hosts.base import AttemptProbe
from eq_tui.manifest.model import Manifest, OomRetry

M = Manifest(project="p", source="m", oom_retry=OomRetry(delay=10, max_attempts=3))
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def probe(**kw: object) -> AttemptProbe:
    base: dict[str, object] = {"key": "j", "session_alive": False, "pid": 10, "pid_alive": False,
                               "started": 1.0, "exit_code": None, "exited_at": None,
                               "log_size": 0, "output_ok": None}
    base.update(kw)
    return AttemptProbe(**base)  # type: ignore[arg-type]


def job(status: JobStatus = JobStatus.RUNNING, attempts: int = 1) -> JobState:
    return JobState(id="j", phase="main", cmd="c", status=status, attempts=attempts)


def test_running_exited_stale_lost_never_started() -> None:
    assert isinstance(observe(job(), probe(session_alive=True, pid_alive=True), now=5,
                              stale_grace_s=5), Running)
    assert observe(job(), probe(exit_code=0), now=5, stale_grace_s=5) == Exited(0, "", None)
    # session outlives its process: running during the grace period, stale after it
    first = observe(job(), probe(exit_code=1, session_alive=True), now=5, stale_grace_s=5)
    assert first == Running(5)
    j = job()
    j.exited_seen_at = 5
    stale = observe(j, probe(exit_code=1, session_alive=True), now=10, stale_grace_s=5)
    assert isinstance(stale, Exited) and stale.stale
    assert isinstance(observe(job(), probe(), now=5, stale_grace_s=5), Lost)
    assert isinstance(observe(job(JobStatus.LAUNCHING), probe(pid=None), now=5,
                              stale_grace_s=5), NeverStarted)


def test_oom_retries_until_max_attempts_then_stuck() -> None:
    for attempts, expected in ((1, JobStatus.FAILED_OOM), (2, JobStatus.FAILED_OOM),
                               (3, JobStatus.STUCK)):
        v = verdict_for_exit(job(attempts=attempts), Exited(1, OOM, None), M, now=100,
                             has_output_check=False)
        assert v.status == expected and v.failure_class == "cuda_oom"
        if expected == JobStatus.FAILED_OOM:
            assert v.retry_at == 110


def test_exit_zero_needs_the_output_when_checked() -> None:
    ok = verdict_for_exit(job(), Exited(0, "", True), M, now=0, has_output_check=True)
    assert ok.status == JobStatus.COMPLETED
    missing = verdict_for_exit(job(), Exited(0, "", False), M, now=0, has_output_check=True)
    assert missing.status == JobStatus.STUCK and missing.failure_class == "output_missing"


def test_host_oom_is_stuck_not_retried() -> None:
    v = verdict_for_exit(job(), Exited(137, "epoch 1\n", None), M, now=0,
                         has_output_check=False)
    assert v.status == JobStatus.STUCK and v.failure_class == "host_oom"


def test_disk_full_stops_the_host_and_gpu_fault_quarantines() -> None:
    disk = verdict_for_exit(job(), Exited(1, "No space left on device", None), M, now=0,
                            has_output_check=False)
    assert disk.status == JobStatus.STUCK and disk.stop_host
    xid = verdict_for_exit(job(), Exited(1, "Xid 79 GPU has fallen off the bus", None), M,
                           now=0, has_output_check=False)
    assert xid.status == JobStatus.PENDING and xid.quarantine_gpus


def test_nccl_retried_once() -> None:
    j = job()
    assert verdict_for_exit(j, Exited(1, "NCCL timeout", None), M, now=0,
                            has_output_check=False).status == JobStatus.PENDING
    j.retries_by_class["nccl"] = 1
    assert verdict_for_exit(j, Exited(1, "NCCL timeout", None), M, now=0,
                            has_output_check=False).status == JobStatus.STUCK


def test_lost_requeued_once_then_stuck() -> None:
    j = job()
    assert verdict_for_lost(j).status == JobStatus.PENDING
    j.retries_by_class["lost"] = 1  # one lost attempt so far
    assert verdict_for_lost(j).status == JobStatus.STUCK


# ---- whole verdicts: every field each path sets, so a wrong detail or class is caught -------

def exit_verdict(code: int, tail: str, *, attempts: int = 1, output_ok: bool | None = None,
                 stale: bool = False, checked: bool = False, **state: object) -> Verdict:
    j = job(attempts=attempts)
    for key, value in state.items():
        setattr(j, key, value)
    return verdict_for_exit(j, Exited(code, tail, output_ok, stale), M, now=100,
                            has_output_check=checked)


def test_every_exit_path_gives_its_whole_verdict() -> None:
    assert exit_verdict(0, "") == Verdict(JobStatus.COMPLETED)
    assert exit_verdict(0, "", output_ok=False, checked=True) == Verdict(
        JobStatus.STUCK, "output_missing", "exit 0 but output_check matched nothing")
    assert exit_verdict(1, OOM) == Verdict(JobStatus.FAILED_OOM, "cuda_oom", OOM, retry_at=110)
    # OOM retries are bounded by attempts, not "once" like NCCL
    assert exit_verdict(1, OOM, attempts=2, retries_by_class={"cuda_oom": 1}).status == \
        JobStatus.FAILED_OOM
    assert exit_verdict(1, OOM, attempts=3) == Verdict(
        JobStatus.STUCK, "cuda_oom", f"{OOM} (attempt 3/3, no retries left)")
    nccl = "RuntimeError: NCCL timeout in call to allreduce"
    assert exit_verdict(1, nccl) == Verdict(JobStatus.PENDING, "nccl", nccl)
    assert exit_verdict(1, nccl, retries_by_class={"nccl": 1}) == Verdict(
        JobStatus.STUCK, "nccl", f"{nccl} (attempt 1/1, no retries left)")
    xid = "NVRM: Xid 79 GPU has fallen off the bus"
    assert exit_verdict(1, xid) == Verdict(JobStatus.PENDING, "gpu_fault", xid,
                                           quarantine_gpus=True)
    assert exit_verdict(1, xid, attempts=3) == Verdict(
        JobStatus.STUCK, "gpu_fault", f"{xid} (attempt 3/3, no retries left)",
        quarantine_gpus=True)
    port = "OSError: [Errno 98] Address already in use"
    assert exit_verdict(1, port) == Verdict(JobStatus.PENDING, "port_in_use", port,
                                            retry_at=130)
    assert exit_verdict(1, port, attempts=3) == Verdict(
        JobStatus.STUCK, "port_in_use", f"{port} (attempt 3/3, no retries left)")
    disk = "OSError: [Errno 28] No space left on device"
    assert exit_verdict(1, disk) == Verdict(JobStatus.STUCK, "disk_full", disk, stop_host=True)
    assert exit_verdict(5, "ValueError: nan") == Verdict(JobStatus.STUCK, "exit_nonzero",
                                                         "exit 5: ValueError: nan")
    assert exit_verdict(5, "ValueError: nan", stale=True) == Verdict(
        JobStatus.STUCK, "exit_nonzero", "exit 5: ValueError: nan (stale session cleaned)")


def test_lost_verdicts_in_whole() -> None:
    j = job()
    assert verdict_for_lost(j) == Verdict(JobStatus.PENDING, "lost",
                                          "session vanished with no exit record; requeued once")
    j.retries_by_class["lost"] = 1  # one lost attempt so far
    assert verdict_for_lost(j) == Verdict(JobStatus.STUCK, "lost",
                                          "session vanished with no exit record again")


def test_lost_requeued_up_to_retry_lost() -> None:
    j = job()
    assert verdict_for_lost(j, 0) == Verdict(JobStatus.STUCK, "lost",
                                             "session vanished with no exit record "
                                             "(retry_lost: 0)")
    assert verdict_for_lost(j, 3) == Verdict(JobStatus.PENDING, "lost", "session vanished "
                                             "with no exit record; requeued 1 of 3 times")
    j.retries_by_class["lost"] = 2
    assert verdict_for_lost(j, 3) == Verdict(JobStatus.PENDING, "lost", "session vanished "
                                             "with no exit record; requeued 3 of 3 times")
    j.retries_by_class["lost"] = 3
    assert verdict_for_lost(j, 3) == Verdict(JobStatus.STUCK, "lost",
                                             "session vanished with no exit record again")


def test_observations_carry_what_the_probe_said() -> None:
    j = job()
    j.exited_seen_at = 3.0
    assert observe(j, None, now=5, stale_grace_s=5) == Running(3.0)  # host not asked: as was
    assert observe(job(), probe(exit_code=2, output_ok=True, log_tail="t"), now=5,
                   stale_grace_s=5) == Exited(2, "t", True)
    j.exited_seen_at = 0.0
    assert observe(j, probe(exit_code=2, session_alive=True, output_ok=False, log_tail="t"),
                   now=5, stale_grace_s=5) == Exited(2, "t", False, stale=True)
    # alive by its session alone, or by its pid alone
    assert observe(job(), probe(session_alive=True), now=5, stale_grace_s=5) == Running(None)
    assert observe(job(), probe(pid_alive=True), now=5, stale_grace_s=5) == Running(None)
    # never started needs both: still launching, and no pid ever written
    assert isinstance(observe(job(JobStatus.LAUNCHING), probe(), now=5, stale_grace_s=5), Lost)
    assert isinstance(observe(job(), probe(pid=None), now=5, stale_grace_s=5), Lost)


# ---- where the output was looked for, and an OOM on a shared GPU ---------------------------

def shared_oom(escalation: int, *, attempts: int = 1, shared: bool = True) -> Verdict:
    j = job(attempts=attempts)
    j.mem_escalation = escalation
    j.history.append(Attempt(n=attempts, host="a", gpus=[0], session="s", attempt_dir="d",
                             log="l", shared=shared))
    return verdict_for_exit(j, Exited(1, OOM, None), M, now=100, has_output_check=False)


def test_output_missing_says_where_the_output_was_looked_for() -> None:
    v = verdict_for_exit(job(), Exited(0, "", False), M, now=0, has_output_check=True,
                         output_where="out/*.pt on gpu1:/runs/x")
    assert v == Verdict(JobStatus.STUCK, "output_missing",
                        "exit 0 but output_check out/*.pt on gpu1:/runs/x matched nothing")


def test_an_oom_on_a_shared_gpu_asks_more_memory_then_its_gpu_alone() -> None:
    assert shared_oom(0) == Verdict(
        JobStatus.FAILED_OOM, "cuda_oom",
        f"{OOM} (on a shared GPU: next attempt gets 1.5x its estimate)", retry_at=110,
        escalate_memory=True)
    # the second time it waits for its GPU alone, at once
    assert shared_oom(1, attempts=2) == Verdict(
        JobStatus.FAILED_OOM, "cuda_oom",
        f"{OOM} (on a shared GPU: next attempt gets its GPU alone)", retry_at=100,
        escalate_memory=True)
    # alone, it is the job's own OOM: the plain delayed retry
    assert shared_oom(2, attempts=2) == Verdict(JobStatus.FAILED_OOM, "cuda_oom", OOM,
                                                retry_at=110)
    assert shared_oom(0, shared=False) == Verdict(JobStatus.FAILED_OOM, "cuda_oom", OOM,
                                                  retry_at=110)


def test_an_oom_on_a_shared_gpu_at_the_last_attempt_is_stuck_without_escalating() -> None:
    assert shared_oom(0, attempts=3) == Verdict(
        JobStatus.STUCK, "cuda_oom",
        f"{OOM} (on a shared GPU: next attempt gets 1.5x its estimate) "
        "(attempt 3/3, no retries left)")


def test_an_ask_larger_than_the_card_it_ran_on_goes_to_a_larger_card_as_an_oom() -> None:
    """JAX's message names no card size: the size of the GPU it ran on decides."""
    jax = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
           "trying to allocate 214748364800 bytes.")
    j = job()
    j.history.append(Attempt(n=1, host="a", gpus=[0], session="s", attempt_dir="d", log="l"))
    v = verdict_for_exit(j, Exited(1, jax, None), M, now=100, has_output_check=False,
                         gpu_totals={"a": {0: 81559}, "b": {0: 262144}})
    assert (v.status, v.failure_class, v.retry_at, v.min_gpu_mib) == (
        JobStatus.FAILED_OOM, "cuda_oom", 100, 200 * 1024)


def test_a_job_past_its_limit_says_the_limit() -> None:
    """Attempts can pass the limit (a manifest that lowered max_attempts on resume)."""
    port = "OSError: [Errno 98] Address already in use"
    assert exit_verdict(1, port, attempts=4).detail == \
        f"{port} (attempt 4/3, no retries left)"
