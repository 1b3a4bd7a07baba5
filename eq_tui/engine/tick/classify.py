"""Failure classification from an attempt's exit code and log tail. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from eq_tui.api.model import FailureClass

_SIGNATURES: tuple[tuple[FailureClass, re.Pattern[str]], ...] = (
    (FailureClass.CUDA_OOM, re.compile(
        r"torch\.(cuda\.)?OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"
        r"|CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED: Out of memory"
        r"|cudaErrorMemoryAllocation|CUDNN_STATUS_ALLOC_FAILED", re.IGNORECASE)),
    (FailureClass.DISK_FULL, re.compile(
        r"No space left on device|basic_ios::clear: iostream error|Disk quota exceeded")),
    (FailureClass.NCCL, re.compile(
        r"NCCL timeout|Watchdog caught collective operation timeout|NCCL error|ncclInternalError",
        re.IGNORECASE)),
    (FailureClass.GPU_FAULT, re.compile(
        r"\bXid\b|uncorrectable ECC error|GPU has fallen off the bus"
        r"|CUDA error: an illegal memory access|unspecified launch failure")),
    (FailureClass.PORT_IN_USE, re.compile(r"Address already in use|EADDRINUSE")),
)

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)
_KILLED = re.compile(r"^\s*Killed\s*$|oom-kill|Out of memory: Killed process", re.M)
_SLURM_OOM = re.compile(r"OUT_OF_MEMORY|oom_kill event|Exceeded job memory limit")


@dataclass(frozen=True)
class Classification:
    cls: FailureClass
    detail: str


def _matching_line(text: str, pattern: re.Pattern[str]) -> str:
    for line in reversed(text.splitlines()):
        if pattern.search(line):
            return line.strip()[:300]
    return ""


def classify_failure(exit_code: int | None, log_tail: str) -> Classification:
    """Classify a failed attempt (nonzero exit). The last matching signature wins ties by order.

    CUDA OOM is checked first: a real OOM traceback outranks a later generic error line.
    Host OOM (the kernel's OOM killer) shows as exit 137 / "Killed" without a Python traceback.
    """
    for cls, pattern in _SIGNATURES:
        line = _matching_line(log_tail, pattern)
        if line:
            return Classification(cls, line)
    if _SLURM_OOM.search(log_tail):
        return Classification(FailureClass.HOST_OOM, _matching_line(log_tail, _SLURM_OOM))
    killed = exit_code == 137 or bool(_KILLED.search(log_tail))
    if killed and not _TRACEBACK.search(log_tail):
        return Classification(FailureClass.HOST_OOM,
                              f"exit {exit_code}: killed (host out of memory?) with no traceback")
    last = next((ln.strip() for ln in reversed(log_tail.splitlines()) if ln.strip()), "")
    return Classification(FailureClass.EXIT_NONZERO, f"exit {exit_code}: {last[:300]}")
