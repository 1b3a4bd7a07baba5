"""Failure classes from an attempt's exit code and log tail."""

import pytest

from eq_tui.api.model import FailureClass
from eq_tui.engine.tick.classify import classify_failure

OOM_TRACE = """Traceback (most recent call last):
  File "train.py", line 10, in <module>
    x = torch.empty(big, device="cuda")
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity
"""


@pytest.mark.parametrize(("code", "tail", "expected"), [
    (1, OOM_TRACE, FailureClass.CUDA_OOM),
    (1, "RuntimeError: CUDA error: out of memory", FailureClass.CUDA_OOM),
    (1, "CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate", FailureClass.CUDA_OOM),
    (1, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate", FailureClass.CUDA_OOM),
    (137, "epoch 1/3 loss=0.5\n", FailureClass.HOST_OOM),
    (137, "epoch 1\nKilled\n", FailureClass.HOST_OOM),
    (1, "slurmstepd: error: Detected 1 oom_kill event in StepId=5.batch", FailureClass.HOST_OOM),
    (1, "OSError: [Errno 28] No space left on device", FailureClass.DISK_FULL),
    (1, "RuntimeError: NCCL timeout in call to allreduce", FailureClass.NCCL),
    (1, "Watchdog caught collective operation timeout: WorkNCCL", FailureClass.NCCL),
    (1, "NVRM: Xid 79, GPU has fallen off the bus", FailureClass.GPU_FAULT),
    (1, "RuntimeError: uncorrectable ECC error encountered", FailureClass.GPU_FAULT),
    (1, "OSError: [Errno 98] Address already in use", FailureClass.PORT_IN_USE),
    (1, "ValueError: loss is nan", FailureClass.EXIT_NONZERO),
    (2, "", FailureClass.EXIT_NONZERO),
])
def test_signatures(code: int, tail: str, expected: FailureClass) -> None:
    assert classify_failure(code, tail).cls == expected


def test_host_oom_with_a_python_traceback_is_not_host_oom() -> None:
    # exit 137 with a traceback is something else killing a failing program, not the OOM killer
    found = classify_failure(137, "Traceback (most recent call last):\nValueError: bad\n")
    assert found.cls == FailureClass.EXIT_NONZERO and "ValueError: bad" in found.detail


def test_detail_names_the_signature_line() -> None:
    found = classify_failure(1, OOM_TRACE)
    assert "OutOfMemoryError" in found.detail


def test_details_quote_the_telling_line_cut_at_300_characters() -> None:
    long_oom = "torch.OutOfMemoryError: CUDA out of memory. " + "x" * 400
    assert classify_failure(1, f"epoch 1\n{long_oom}\n").detail == long_oom[:300]
    slurm = "slurmstepd: error: Detected 1 oom_kill event in StepId=5.batch"
    assert classify_failure(1, f"epoch 1\n{slurm}\nepoch 2\n").detail == slurm
    assert classify_failure(137, "epoch 1\n").detail == \
        "exit 137: killed (host out of memory?) with no traceback"
    assert classify_failure(2, "").detail == "exit 2: "
    last = "ValueError: " + "y" * 400
    assert classify_failure(1, f"{last}\n\n").detail == f"exit 1: {last[:300]}"


def test_a_killed_line_means_host_oom_whatever_the_exit_code() -> None:
    # the kernel saying it killed the process is enough, whatever exit code the wrapper saw
    assert classify_failure(1, "epoch 1\nKilled\n").cls == FailureClass.HOST_OOM
    assert classify_failure(1, "Out of memory: Killed process 4242 (python)").cls == \
        FailureClass.HOST_OOM
