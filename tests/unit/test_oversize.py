"""A CUDA OOM that asks more than its card holds: the ask read from torch's and JAX's messages,
the verdict (only larger GPUs next, or stuck at once), and the scheduler keeping such a job to
larger GPUs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.decide.oversize import OomAsk, Oversize, oom_ask, oversize
from eq_tui.engine.decide.scheduler import GpuView, HostView, decide
from eq_tui.engine.tick.judge import Exited, verdict_for_exit
from eq_tui.manifest.model import JobSpec, Manifest, OomRetry

TORCH = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 has a "
         "total capacity of 79.18 GiB of which 78.50 GiB is free. Including non-PyTorch memory, "
         "this process has 310.00 MiB memory in use.")
TORCH_OLD = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB "
             "total capacity; 14.56 GiB already allocated; 3.12 MiB free; 14.68 GiB reserved in "
             "total by PyTorch)")
JAX = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
       "to allocate 214748364800 bytes.")
GIB = 1024


@pytest.mark.parametrize(("tail", "expected"), [
    (TORCH, OomAsk(200 * GIB, 79.18 * GIB)),
    (TORCH_OLD, OomAsk(20.0, 15.78 * GIB)),
    ("Tried to allocate 512.00 MiB. GPU 1 has a total capacity of 23.65 GiB of which 1 MiB",
     OomAsk(512.0, 23.65 * GIB)),
    (JAX, OomAsk(200 * GIB)),
    ("RESOURCE_EXHAUSTED: Failed to allocate request for 2.00GiB (2147483648B) on device",
     OomAsk(2 * GIB)),
    ("torch.OutOfMemoryError: CUDA out of memory.", None),
    ("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)", None),
])
def test_the_ask_and_the_cards_total_from_the_message(tail: str,
                                                      expected: OomAsk | None) -> None:
    found = oom_ask(f"epoch 1\nTraceback (most recent call last):\n{tail}\n")
    if expected is None:
        assert found is None
        return
    assert found is not None and found.asked_mib == pytest.approx(expected.asked_mib)
    assert (found.total_mib is None) == (expected.total_mib is None)
    if expected.total_mib is not None:
        assert found.total_mib == pytest.approx(expected.total_mib)


def test_the_last_oom_line_is_the_one_read() -> None:
    earlier = TORCH.replace("200.00 GiB", "1.00 GiB")
    found = oom_ask(f"{earlier}\nretrying with a smaller batch\n{TORCH}\n")
    assert found is not None and found.asked_mib == 200 * GIB


def test_an_ask_the_card_holds_is_a_plain_oom() -> None:
    tail = TORCH.replace("200.00 GiB", "2.00 GiB")
    assert oversize(tail, "a", [0], {"a": {0: 81559}}) is None


def test_without_the_total_in_the_message_the_attempts_gpus_say_it() -> None:
    totals = {"a": {0: 24576, 1: 24576}, "b": {0: 262144}}
    big = oversize(JAX, "a", [1], totals)
    assert big == Oversize(200 * GIB, 24576, 262144, 200 * GIB)
    assert big.fits_somewhere
    # the host's GPUs not known yet: nothing to judge by
    assert oversize(JAX, "a", [1], {"a": None, "b": {0: 262144}}) is None


def test_a_card_the_size_of_the_one_it_ran_on_is_never_larger() -> None:
    # torch's total (79.18 GiB) is under nvidia-smi's (81559 MiB, 79.6 GiB): an ask between
    # the two must not send the retry to another card of the same size
    tail = TORCH.replace("200.00 GiB", "79.50 GiB")
    same = oversize(tail, "a", [0], {"a": {0: 81559}, "b": {0: 81559}})
    assert same is not None and same.floor_mib == 81559 and not same.fits_somewhere
    larger = oversize(tail, "a", [0], {"a": {0: 81559}, "b": {0: 143771}})
    assert larger is not None and larger.fits_somewhere


def test_the_detail_names_the_ask_and_the_largest_gpu() -> None:
    big = oversize(TORCH, "a", [0], {"a": {0: 81559}})
    assert big is not None and not big.fits_somewhere
    assert big.detail == "asked 200.0 GiB; the largest GPU has 79.6 GiB"
    alone = oversize(TORCH, "a", [0], {"a": None})
    assert alone is not None and alone.detail == (
        "asked 200.0 GiB; the largest GPU has 79.2 GiB (GPUs not known on a)")


# ---- the verdict -----------------------------------------------------------------------------

M = Manifest(project="p", source="m", oom_retry=OomRetry(delay=10, max_attempts=3))


def oomed(host: str = "a", attempts: int = 1) -> JobState:
    job = JobState(id="j", phase="main", cmd="c", status=JobStatus.RUNNING, attempts=attempts)
    job.history.append(Attempt(n=attempts, host=host, gpus=[0], session="s", attempt_dir="d",
                               log="l"))
    return job


def test_no_larger_gpu_anywhere_is_stuck_at_once() -> None:
    verdict = verdict_for_exit(oomed(), Exited(1, TORCH, None), M, now=100,
                               has_output_check=False, gpu_totals={"a": {0: 81559, 1: 81559}})
    assert verdict.status == JobStatus.STUCK and verdict.failure_class == FailureClass.CUDA_OOM
    assert verdict.detail == "asked 200.0 GiB; the largest GPU has 79.6 GiB"
    assert verdict.retry_at is None and verdict.min_gpu_mib is None


def test_a_larger_gpu_elsewhere_takes_the_retry_at_once() -> None:
    verdict = verdict_for_exit(oomed(), Exited(1, TORCH, None), M, now=100,
                               has_output_check=False,
                               gpu_totals={"a": {0: 81559}, "b": {0: 262144}})
    assert verdict.status == JobStatus.FAILED_OOM and verdict.retry_at == 100
    assert verdict.min_gpu_mib == 200 * GIB
    assert "retried only on a GPU with more than 200.0 GiB" in verdict.detail
    # the retry budget still holds
    last = verdict_for_exit(oomed(attempts=3), Exited(1, TORCH, None), M, now=100,
                            has_output_check=False,
                            gpu_totals={"a": {0: 81559}, "b": {0: 262144}})
    assert last.status == JobStatus.STUCK and last.min_gpu_mib is None


def test_an_oom_the_card_could_hold_keeps_the_delayed_retry() -> None:
    small = TORCH.replace("200.00 GiB", "2.00 GiB")
    verdict = verdict_for_exit(oomed(), Exited(1, small, None), M, now=100,
                               has_output_check=False, gpu_totals={"a": {0: 81559}})
    assert verdict.status == JobStatus.FAILED_OOM and verdict.retry_at == 110
    assert verdict.min_gpu_mib is None


# ---- the scheduler ---------------------------------------------------------------------------

def view(name: str, total: int, count: int = 2, **kwargs: object) -> HostView:
    defaults: dict[str, object] = {"usable": True, "allowed": None, "max_parallel": 8}
    defaults.update(kwargs)
    gpus = tuple(GpuView(i, 0, total) for i in range(count))
    return HostView(name=name, gpus=gpus, **defaults)  # type: ignore[arg-type]


def two_jobs() -> tuple[Manifest, list[JobState]]:
    specs = (JobSpec(id="big", phase="main", cmd="a"), JobSpec(id="small", phase="main", cmd="b"))
    m = replace(M, jobs=specs)
    big = JobState(id="big", phase="main", cmd="a", status=JobStatus.FAILED_OOM, retry_at=0,
                   attempts=1, min_gpu_mib=200 * GIB)
    return m, [big, JobState(id="small", phase="main", cmd="b")]


def test_a_floored_job_goes_only_to_a_larger_gpu_and_the_others_go_around_it() -> None:
    m, jobs = two_jobs()
    hosts = [view("a", 24576, count=2), view("b", 262144, count=1)]
    decision = decide(m, jobs, hosts, now=1, paused=False, preconditions={})
    assert sorted((x.job_id, x.host, x.gpus) for x in decision.launches) == [
        ("big", "b", (0,)), ("small", "a", (0,))]


def test_a_floored_job_waits_with_the_reason_while_no_larger_gpu_is_free() -> None:
    m, jobs = two_jobs()
    hosts = [view("a", 24576, count=2), view("b", 262144, count=1, allowed=frozenset())]
    decision = decide(m, jobs, hosts, now=1, paused=False, preconditions={})
    assert [(x.job_id, x.host) for x in decision.launches] == [("small", "a")]
    assert "needs a GPU with more than 200.0 GiB" in decision.waiting["big"]


def test_the_larger_gpu_a_floored_job_took_is_not_given_again() -> None:
    m, jobs = two_jobs()
    jobs[1].min_gpu_mib = None
    hosts = [view("b", 262144, count=1)]
    decision = decide(m, jobs, hosts, now=1, paused=False, preconditions={})
    assert [(x.job_id, x.host) for x in decision.launches] == [("big", "b")]


def test_a_gpu_total_of_zero_is_no_reading() -> None:
    """A Slurm node's GPUs say no size: an ask with no total in the message is a plain OOM."""
    tail = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
    assert oversize(tail, "cluster", [0], {"cluster": {0: 0, 1: 0}}) is None
    big = oversize("Tried to allocate 200.00 GiB. GPU 0 has a total capacity of 79.18 GiB",
                   "box", [0], {"box": {0: 81559}, "cluster": {0: 0}})
    assert big is not None and big.unknown == ("cluster",) and big.largest_mib == 81559
