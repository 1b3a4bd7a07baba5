"""GPU readings through NVML (`nvidia-ml-py`, imported as `pynvml`) when a driver is present."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from eq_tui.hosts.base import GpuProcess, GpuReading

SAMPLE_WINDOW_S = 3.0  # per-process utilisation samples looked at: about one probe interval


class NvmlReader:
    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml

    @classmethod
    def open(cls) -> NvmlReader | None:
        """The reader, or None when there is no NVIDIA driver (then nvidia-smi is used)."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # no library, no driver, no device: all mean "use nvidia-smi"
            return None
        return cls(pynvml)

    def _read_sync(self) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
        nvml = self._nvml
        readings: list[GpuReading] = []
        processes: list[GpuProcess] = []
        warnings: list[str] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            used = total = util = None
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                used, total = memory.used // (1024 * 1024), memory.total // (1024 * 1024)
            except nvml.NVMLError as exc:
                warnings.append(f"GPU {index}: memory not readable ({exc}); no launches on it")
            try:
                util = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except nvml.NVMLError:
                util = None
            readings.append(GpuReading(index, uuid, _text(nvml.nvmlDeviceGetName(handle)), used,
                                       total, util, *_power(nvml, handle)))
            on_gpu: list[GpuProcess] = []
            try:
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    mib = proc.usedGpuMemory // (1024 * 1024) if proc.usedGpuMemory else None
                    pid = int(proc.pid)
                    on_gpu.append(GpuProcess(pid, uuid, mib, pgid=_group(os.getpgid, pid),
                                             sid=_group(os.getsid, pid)))
            except nvml.NVMLError:
                pass
            processes += _with_own_utilisation(nvml, handle, on_gpu)
        return readings, processes, warnings

    async def read(self) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
        try:
            return await asyncio.to_thread(self._read_sync)
        except Exception as exc:
            return [], [], [f"NVML read failed: {exc}"]


def _power(nvml: Any, handle: Any) -> tuple[float | None, float | None]:
    """The board's power now (W) and its total-energy counter (J; Volta and later): None each
    where the card has no such reading."""
    try:
        watts: float | None = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    except (nvml.NVMLError, AttributeError):  # AttributeError: a binding without the call
        watts = None
    try:
        joules: float | None = nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0
    except (nvml.NVMLError, AttributeError):
        joules = None
    return watts, joules


def _with_own_utilisation(nvml: Any, handle: Any,
                          processes: list[GpuProcess]) -> list[GpuProcess]:
    """On a GPU several processes share, each one's own SM utilisation over the last seconds
    (NVML leaves a process that computed nothing out of its samples: 0); as they were where the
    driver cannot tell."""
    if len(processes) < 2:
        return processes
    since_us = int((time.time() - SAMPLE_WINDOW_S) * 1_000_000)
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError:
        return processes
    own: dict[int, int] = {}
    for sample in samples:
        own[int(sample.pid)] = max(own.get(int(sample.pid), 0), int(sample.smUtil))
    return [replace(p, util_pct=own.get(p.pid, 0)) for p in processes]


def _group(read: Callable[[int], int], pid: int) -> int | None:
    """A local process's group or session (None when it is gone or not ours to see)."""
    try:
        return read(pid)
    except OSError:
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
