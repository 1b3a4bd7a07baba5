"""GPU readings through NVML (`nvidia-ml-py`, imported as `pynvml`) when a driver is present."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from eq_tui.hosts.base import GpuProcess, GpuReading


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
                                       total, util))
            try:
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    mib = proc.usedGpuMemory // (1024 * 1024) if proc.usedGpuMemory else None
                    pid = int(proc.pid)
                    processes.append(GpuProcess(pid, uuid, mib, pgid=_group(os.getpgid, pid),
                                                sid=_group(os.getsid, pid)))
            except nvml.NVMLError:
                pass
        return readings, processes, warnings

    async def read(self) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
        try:
            return await asyncio.to_thread(self._read_sync)
        except Exception as exc:
            return [], [], [f"NVML read failed: {exc}"]


def _group(read: Callable[[int], int], pid: int) -> int | None:
    """A local process's group or session (None when it is gone or not ours to see)."""
    try:
        return read(pid)
    except OSError:
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
